package pattern

// Tracked reports which of ids o keeps a session for, and how many
// sessions it keeps, for tests of its bounds.
func (o *Online) Tracked(ids ...string) (n int, has []bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, id := range ids {
		_, ok := o.sessions[id]
		has = append(has, ok)
	}
	return len(o.sessions), has
}

// Window returns the length of the window of recent signatures.
func (o *Online) Window() int { return o.k }

// Index returns the compiled pool o serves, for tests of its counts.
func (o *Online) Index() *Index { return o.x }
