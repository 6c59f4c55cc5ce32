package learn

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/ahead-dev/ahead/convo"
	"github.com/ahead-dev/ahead/mine"
	"github.com/ahead-dev/ahead/pattern"
	"github.com/ahead-dev/ahead/trace"
)

// Mine mines both parts of a pool from sessions: the tool-call patterns
// (mine.Mine, with opts) and, when the sessions carry messages, the
// conversation model (MineInto); heard reports that they did. The two
// parts read the sessions and nothing else of each other, so they are
// mined side by side (issue 24: a checkpoint relearns 20,000 calls with
// their messages in seconds on two cores); the pool is the one mining
// them one after the other gives, byte for byte.
func Mine(sessions []trace.Session, opts *mine.Options) (pool *pattern.Pool, heard bool, err error) {
	var conv *pattern.Pool // carries only the conversation model
	var convErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		conv = &pattern.Pool{}
		heard, convErr = MineInto(conv, sessions)
	})
	pool, err = mine.Mine(sessions, opts)
	wg.Wait()
	if err != nil {
		return nil, false, err
	}
	if convErr != nil {
		return nil, false, convErr
	}
	pool.Conversation = conv.Conversation
	return pool, heard, nil
}

// conversation returns a predictor serving the conversation model a pool
// file carries (pattern.Pool.Conversation), or nil when it carries none.
func conversation(pool *pattern.Pool) (*convo.Predictor, error) {
	if len(pool.Conversation) == 0 {
		return nil, nil
	}
	var m convo.Model
	if err := json.Unmarshal(pool.Conversation, &m); err != nil {
		return nil, fmt.Errorf("the pool's conversation model: %w (re-mine the pool with this ahead)", err)
	}
	return convo.New(&m, nil), nil
}

// MineInto mines the conversation model of sessions into pool when they
// carry messages (the -conv traces, recordings of a server that heard
// them); it reports whether it did.
func MineInto(pool *pattern.Pool, sessions []trace.Session) (bool, error) {
	heard := false
	for _, s := range sessions {
		if len(s.Messages) > 0 {
			heard = true
			break
		}
	}
	if !heard {
		return false, nil
	}
	m, err := convo.Mine(sessions, nil)
	if err != nil {
		return false, fmt.Errorf("mining the conversation: %w", err)
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return false, fmt.Errorf("encoding the conversation model: %w", err)
	}
	pool.Conversation = raw
	return true, nil
}

// EmptyPool returns a pool with no patterns, as a new Learner starts from.
func EmptyPool() *pattern.Pool {
	return &pattern.Pool{Version: pattern.Version, Discriminators: []pattern.Discriminator{}, Patterns: []pattern.Pattern{}}
}
