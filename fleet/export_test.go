package fleet

// Mutations for the differential tests: each removes one rule of shared
// results, and the tests show that its absence is seen.

// SetNoPurge stops f's writes from purging the results bucket.
func SetNoPurge(f *Fleet) { f.noPurge = true }

// SetNoResultCheck makes f reuse a shared result without checking the
// writes it applied since the result's mark.
func SetNoResultCheck(f *Fleet) { f.noResultCheck = true }
