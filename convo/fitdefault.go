package convo

import (
	"sync"

	"github.com/ahead-dev/ahead/trace"
)

// FitDefault fits a built-in default on sessions (calls and messages),
// across their tools: the sessions are split in two halves (by a hash of
// their id, as Mine splits them), the tools are learnt from each half as
// a Fresh predictor learns them (argument names, values' looks, key sets,
// call sequence; nothing else), and the shared weights are those under
// which each half's tools predicted the other half's calls best; the
// weight of the tools' name words and the calibration maps are chosen
// and observed the same way. The result names no tool and holds no value.
// opts may be nil; only MaxBytes is read.
func FitDefault(sessions []trace.Session, opts *MineOptions) (*Default, error) {
	o := opts.withDefaults()
	d := &Default{Version: DefaultVersion, Weights: defaultWeights(), Lambda: 0.5, NameNear: 1}
	tools := make(map[string]bool)
	for _, s := range sessions {
		d.Sessions++
		for _, ev := range s.Events {
			d.Calls++
			tools[ev.Tool] = true
		}
	}
	d.Tools = len(tools)
	if d.Calls == 0 {
		return nil, ErrNoSessions
	}
	var halves [2][]trace.Session
	for _, s := range sessions {
		h := 0
		if trace.KeyBucket("convo/"+s.ID) < 0.5 {
			h = 1
		}
		halves[h] = append(halves[h], s)
	}
	if len(halves[0]) == 0 || len(halves[1]) == 0 {
		halves[0], halves[1] = sessions, sessions
	}
	// Every message is read once for the replays below (lexicon.go).
	lex := newLexicon(sessions)
	var seens [2]*seen
	var wg sync.WaitGroup
	for h := range halves {
		wg.Go(func() { seens[h] = seenFrom(halves[h], o.MaxBytes, lex) })
	}
	wg.Wait()
	// The weights: each half's tools scoring the other half's values.
	var ins [2][]instance
	for h := range halves {
		wg.Go(func() {
			c := compileSynth(seens[h].synth(d), seens[h], d)
			ins[h] = instances(c, halves[1-h], o.MaxBytes, lex)
		})
	}
	wg.Wait()
	d.Weights = fitWeights(append(ins[0], ins[1]...))
	// The weight of the name words in tool choice.
	var ll [2][len(lambdaGrid)]float64
	for h := range halves {
		wg.Go(func() {
			c := compileSynth(seens[h].synth(d), seens[h], d)
			toolLogLik(&ll[h], c, halves[1-h], o.MaxBytes, lex)
		})
	}
	wg.Wait()
	best := 0
	for g := range lambdaGrid {
		if ll[0][g]+ll[1][g] > ll[0][best]+ll[1][best] {
			best = g
		}
	}
	d.Lambda = lambdaGrid[best]
	// Calibration, with the weights chosen.
	var pairs [2][nStrata][]calPair
	for h := range halves {
		wg.Go(func() {
			c := compileSynth(seens[h].synth(d), seens[h], d)
			appendPairs(&pairs[h], c, halves[1-h], o.MaxBytes, lex)
		})
	}
	wg.Wait()
	d.Calibration = make(map[string][]CalPoint)
	for i, name := range strata {
		d.Calibration[name] = isotonic(append(pairs[0][i], pairs[1][i]...))
	}
	return d, nil
}

// seenFrom learns the tools of sessions as a Fresh predictor would; lex
// may be nil.
func seenFrom(sessions []trace.Session, maxBytes int, lex *lexicon) *seen {
	s := newSeen()
	c0 := compile(&Model{Version: ModelVersion})
	for _, sess := range sessions {
		st := newState(c0, maxBytes, false)
		st.lex = lex
		for ev := range trace.Known(sess) {
			if ev.IsMessage() {
				st.hear(ev)
				continue
			}
			s.call(st, sess.ID, ev)
			st.observe(ev)
		}
	}
	return s
}
