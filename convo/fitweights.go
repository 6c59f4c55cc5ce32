package convo

import (
	"encoding/binary"
	"hash/maphash"
	"math"
)

// fitWeights fits the conditional logit (a softmax over each instance's
// candidates and "none of them", whose score is 0) by gradient descent
// with a little L2 regularisation. It drops each instance's features
// (in.x) once read: the fit keeps them in a smaller form.
//
// What two candidates or two instances compute alike is computed once,
// with the same floating-point operations, so that the weights are those
// of one score per candidate and one softmax per instance, bit for bit
// (TestFitsSame):
//   - candidates with the same features (half of them: a value offered
//     for the same argument from the same kind of place) have the same
//     score: it is computed once per distinct vector;
//   - instances with the same candidates and label (a fifth: the same
//     argument of repeated calls) have the same softmax: each after the
//     first adds the first's gradient terms, kept from its pass.
func fitWeights(ins []instance) []float64 {
	w := defaultWeights()
	if len(ins) == 0 {
		return w
	}
	// The distinct vectors' nonzero features only, in feature order:
	// about 8 of 21, 9 bytes each (in place of 168 bytes a candidate). A
	// zero feature adds a zero to a sum that is never -0 (it starts at
	// +0, and round-to-nearest gives +0 for x-x), which changes nothing:
	// the weights are the same, bit for bit, as the dense sums'.
	var (
		fidx []uint8
		fval []float64
		ends []int32 // vector v's features end at ends[v]
	)
	// The vectors by hash: a collision (two different vectors, one hash)
	// gives the second a vector of its own, as if it were distinct, so
	// the map saves time and never decides a weight.
	seed := maphash.MakeSeed()
	vecOf := make(map[uint64]int32)
	cands := make([]int32, 0, len(ins)) // the candidates' vectors, instance by instance
	// An instance is its candidates' vectors and its label; one that
	// repeats an earlier one reads the first's gradient terms (q, from
	// its first candidate's index in cands).
	type row struct {
		n, label int32
		first    int32 // the first identical instance's first candidate, or -1
	}
	rows := make([]row, len(ins))
	firstOf := make(map[string]int32)
	var key []byte
	for r := range ins {
		in := &ins[r]
		from := int32(len(cands))
		key = binary.LittleEndian.AppendUint32(key[:0], uint32(in.label))
		for i := range in.x {
			hv := maphash.Comparable(seed, in.x[i])
			v, ok := vecOf[hv]
			if ok {
				lo := int32(0)
				if v > 0 {
					lo = ends[v-1]
				}
				ok = sameVec(fidx[lo:ends[v]], fval[lo:ends[v]], &in.x[i])
			}
			if !ok {
				v = int32(len(ends))
				if _, taken := vecOf[hv]; !taken {
					vecOf[hv] = v
				}
				for f, x := range in.x[i] {
					if x != 0 {
						fidx = append(fidx, uint8(f))
						fval = append(fval, x)
					}
				}
				ends = append(ends, int32(len(fval)))
			}
			cands = append(cands, v)
			key = binary.LittleEndian.AppendUint32(key, uint32(v))
		}
		first, ok := firstOf[string(key)]
		if !ok {
			first = -1
			firstOf[string(key)] = from
		}
		rows[r] = row{int32(len(in.x)), int32(in.label), first}
		in.x = nil
	}
	vecOf, firstOf = nil, nil
	score := make([]float64, len(ends))
	q := make([]float64, len(cands)) // each candidate's factor of the gradient (read from the first copy of an instance)
	g := make([]float64, nFeat)
	h := make([]float64, nFeat)
	const l2, rate = 1e-3, 0.3
	for it := 0; it < 120; it++ {
		from := 0
		for v, end := range ends {
			var s float64
			for j, f := range fidx[from:end] {
				s += w[f] * fval[from+j]
			}
			score[v] = s
			from = int(end)
		}
		clear(g)
		k := 0 // the instance's first candidate
		for _, r := range rows {
			n := int(r.n)
			cs := cands[k : k+n]
			base := k
			if r.first >= 0 {
				// The same candidates and label as an earlier instance:
				// the same factors.
				base = int(r.first)
			} else {
				p := q[k : k+n]
				best := 0.0
				for i, v := range cs {
					p[i] = score[v]
					best = max(best, p[i])
				}
				z := math.Exp(-best)
				for i := range p {
					p[i] = math.Exp(p[i] - best)
					z += p[i]
				}
				for i := range p {
					p[i] /= z
				}
				if r.label >= 0 {
					p[r.label]--
				}
			}
			for i, v := range cs {
				qi := q[base+i]
				lo, hi := 0, int(ends[v])
				if v > 0 {
					lo = int(ends[v-1])
				}
				for j, f := range fidx[lo:hi] {
					g[f] += qi * fval[lo+j]
				}
			}
			k += n
		}
		for f := range w {
			gf := g[f]/float64(len(ins)) + l2*w[f]
			h[f] += gf * gf
			w[f] -= rate * gf / (math.Sqrt(h[f]) + 1e-8)
		}
	}
	return w
}

// sameVec reports whether x's nonzero features are fidx and fval.
func sameVec(fidx []uint8, fval []float64, x *[nFeat]float64) bool {
	j := 0
	for f, v := range x {
		if v == 0 {
			continue
		}
		if j == len(fidx) || int(fidx[j]) != f || fval[j] != v {
			return false
		}
		j++
	}
	return j == len(fidx)
}
