package fleet

import "time"

// Mutations for the differential tests: each removes one rule of the
// fleet, and the tests show that its absence is seen.

// SetNoPurge stops f's writes from purging the results bucket.
func SetNoPurge(f *Fleet) { f.noPurge = true }

// SetNoResultCheck makes f reuse a shared result without checking the
// writes it applied since the result's mark.
func SetNoResultCheck(f *Fleet) { f.noResultCheck = true }

// SetNoPresence makes f's fences ignore a replica gone quiet (presence.go):
// they succeed while a replica that cannot announce its writes is missing.
func SetNoPresence(f *Fleet) { f.noPresence = true }

// Presence reports whether f has heard replica, and whether it takes it
// for missing (quiet for three heartbeats, not yet for PresenceTTL),
// whatever SetNoPresence says.
func Presence(f *Fleet, replica string) (heard, missing bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, heard := f.heard[replica]
	quiet := time.Since(t)
	return heard, heard && quiet > 3*f.opts.HeartbeatInterval && quiet < f.opts.PresenceTTL
}
