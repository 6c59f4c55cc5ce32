package predict

// LeastRecent returns the key of the session a predictor bounded by its
// number of sessions forgets first: the one whose lastUse (a clock the
// predictor advances at each use) is lowest. It scans: predictors call it
// only at their bound, which an engine that calls Forget rarely reaches.
func LeastRecent[S any](sessions map[string]S, lastUse func(S) uint64) string {
	var oldest string
	var at uint64
	first := true
	for id, s := range sessions {
		if u := lastUse(s); first || u < at {
			oldest, at, first = id, u, false
		}
	}
	return oldest
}
