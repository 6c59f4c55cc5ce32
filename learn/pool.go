package learn

import (
	"encoding/json"
	"fmt"

	"github.com/ahead-dev/ahead/convo"
	"github.com/ahead-dev/ahead/pattern"
	"github.com/ahead-dev/ahead/trace"
)

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
