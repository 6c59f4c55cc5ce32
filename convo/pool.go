package convo

import (
	"encoding/json"
	"fmt"

	"github.com/ahead-dev/ahead/pattern"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/trace"
)

// FromPool returns a predictor serving the conversation model a pool file
// carries (pattern.Pool.Conversation), or nil when it carries none.
func FromPool(pool *pattern.Pool, opts *Options) (*Predictor, error) {
	if len(pool.Conversation) == 0 {
		return nil, nil
	}
	var m Model
	if err := json.Unmarshal(pool.Conversation, &m); err != nil {
		return nil, fmt.Errorf("the pool's conversation model: %w (re-mine the pool with this ahead)", err)
	}
	return New(&m, opts), nil
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
	m, err := Mine(sessions, nil)
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

// Parts returns the predictor of the conversation model pool carries, as
// a part to join with the patterns' (predict.PoolOptions.Parts); none
// when it carries none.
func Parts(pool *pattern.Pool) ([]predict.Part, error) {
	c, err := FromPool(pool, nil)
	if c == nil || err != nil {
		return nil, err
	}
	return []predict.Part{c}, nil
}

// Serve returns the predictor of a pool file: its patterns (an online
// predictor with opts) joined with its conversation model, if any.
func Serve(pool *pattern.Pool, opts *predict.OnlineOptions) (*predict.Joined, error) {
	online, err := predict.NewOnline(pool, opts)
	if err != nil {
		return nil, err
	}
	parts, err := Parts(pool)
	if err != nil {
		return nil, err
	}
	return predict.Join(append([]predict.Part{online}, parts...)...), nil
}
