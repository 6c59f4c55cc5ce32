package convo

import (
	"cmp"
	"encoding/json"
	"errors"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/ahead-dev/ahead/trace"
)

// MineOptions configure Mine. The zero value of each field means its
// default.
type MineOptions struct {
	// MinSessions is the least number of sessions a word (or a constant)
	// must be seen in to be kept; 0 means 5. Values below 5 are raised to
	// 5: it is the privacy floor.
	MinSessions int
	// MaxBytes bounds each session's window of text, as Options.MaxBytes;
	// 0 means DefaultMaxBytes.
	MaxBytes int
	// Lambda weighs the user's words against the call sequence in tool
	// choice; 0 means the value of lambdaGrid under which each half of
	// the cross-fit predicted the other half's tools best (0.5 when
	// there is no cross-fit), negative means words are not used.
	Lambda float64
	// NoCalibration skips the held-out calibration (P is then the raw
	// score); for tests.
	NoCalibration bool
}

// DefaultMaxBytes is the default window of a session's text.
const DefaultMaxBytes = 32 << 10

func (o *MineOptions) withDefaults() MineOptions {
	var r MineOptions
	if o != nil {
		r = *o
	}
	r.MinSessions = max(r.MinSessions, 5)
	if r.MaxBytes <= 0 {
		r.MaxBytes = DefaultMaxBytes
	}
	if r.Lambda == 0 {
		r.Lambda = 0.5
	} else if r.Lambda < 0 {
		r.Lambda = 0
	}
	return r
}

// ErrNoSessions is returned by Mine when it is given no calls.
var ErrNoSessions = errors.New("convo: no calls to mine")

// Mine learns a Model from sessions, read through trace.Known.
//
// Probabilities are made honest by cross-fitting: the sessions are split
// in two halves by a hash of their id; a model fitted on each half
// predicts the other, and the hit rates observed there, against the raw
// scores, give an isotonic calibration map for the model fitted on all.
func Mine(sessions []trace.Session, opts *MineOptions) (*Model, error) {
	o := opts.withDefaults()
	n := 0
	for _, s := range sessions {
		n += len(s.Events)
	}
	if n == 0 {
		return nil, ErrNoSessions
	}
	// Every message is read once for the replays below (lexicon.go).
	lex := newLexicon(sessions)
	if o.NoCalibration {
		return fit(sessions, &o, lex, vocabulary(sessions, o.MinSessions, lex)), nil
	}
	var halves [2][]trace.Session
	half := make([]int, len(sessions))
	for i, s := range sessions {
		h := 0
		if trace.KeyBucket("convo/"+s.ID) < 0.5 {
			h = 1
		}
		half[i] = h
		halves[h] = append(halves[h], s)
	}
	both := len(halves[0]) > 0 && len(halves[1]) > 0
	words, halfWords := vocabularies(sessions, half, o.MinSessions, lex)
	// The three fits are independent: run them side by side.
	var m *Model
	var halfModels [2]*Model
	var halfCompiled [2]*compiled // compile reads no Lambda: one serves both uses
	var ll [2][len(lambdaGrid)]float64
	choose := both && (opts == nil || opts.Lambda == 0)
	var wg sync.WaitGroup
	// The fit on all records the words heard at each call: each half
	// reads its log likelihoods on the other half from them, in place of
	// replaying it (toolLogLikSets).
	var tmAll *tableMiner
	tables := make(chan struct{})
	wg.Go(func() {
		var tm *tableMiner
		m, tm = fitTables(sessions, &o, lex, words)
		tmAll = tm
		close(tables)
		fitScores(m, tm, sessions, &o, lex)
	})
	if both {
		for h := range halves {
			wg.Go(func() {
				halfModels[h] = fit(halves[h], &o, lex, halfWords[h])
				halfCompiled[h] = compile(halfModels[h])
				if choose {
					<-tables
					other := func(i int) bool { return half[i] != h }
					toolLogLikSets(&ll[h], halfCompiled[h], tmAll, sessions, other, o.MaxBytes, lex)
				}
			})
		}
	}
	wg.Wait()
	if choose {
		best := 0
		for g := range lambdaGrid {
			if ll[0][g]+ll[1][g] > ll[0][best]+ll[1][best] {
				best = g
			}
		}
		m.Lambda = lambdaGrid[best]
		for _, hm := range halfModels {
			hm.Lambda = m.Lambda
		}
	}
	// Calibrate with the lambda chosen: the raw scores depend on it.
	var halfPairs [2][nStrata][]calPair
	if both {
		for h := range halves {
			wg.Go(func() {
				appendPairs(&halfPairs[h], halfCompiled[h], halves[1-h], o.MaxBytes, lex)
			})
		}
	}
	wg.Wait()
	var pairs [nStrata][]calPair
	for h := range halfPairs {
		for i := range pairs {
			pairs[i] = append(pairs[i], halfPairs[h][i]...)
		}
	}
	m.Calibration = make(map[string][]CalPoint)
	for i, name := range strata {
		m.Calibration[name] = isotonic(pairs[i])
	}
	return m, nil
}

// fit learns the tables and the weights of a model from sessions, with
// their vocabulary words; lex may be nil.
func fit(sessions []trace.Session, o *MineOptions, lex *lexicon, words map[string]float64) *Model {
	m, tm := fitTables(sessions, o, lex, words)
	fitScores(m, tm, sessions, o, lex)
	return m
}

// fitScores fits tool choice's weights and the value scorer's on the
// tables of m, counted with tm from sessions.
func fitScores(m *Model, tm *tableMiner, sessions []trace.Session, o *MineOptions, lex *lexicon) {
	fitToolWords(m, compile(m), tm.wordSets, tm.samples)
	m.Weights = fitWeights(instances(compile(m), sessions, o.MaxBytes, lex))
}

// fitTables counts the tables of a model from sessions, with their
// vocabulary words, and keeps tool choice's samples in the returned miner.
func fitTables(sessions []trace.Session, o *MineOptions, lex *lexicon, words map[string]float64) (*Model, *tableMiner) {
	m := &Model{Version: ModelVersion, MinSessions: o.MinSessions, Lambda: o.Lambda, Seq: make(map[string]map[string]float64)}
	m.Words = words
	c0 := compile(m)
	tm := newTableMiner(m)
	tm.vocab = c0.words
	r := newReplay(lex, true)
	for _, s := range sessions {
		st := r.state(c0, o.MaxBytes, s)
		tm.session = s.ID
		for ev := range trace.Known(s) {
			if ev.IsMessage() {
				st.hear(ev)
				continue
			}
			tm.call(st, ev)
			st.observe(ev)
		}
		tm.ends = append(tm.ends, int32(len(tm.samples)))
	}
	tm.finish(o.MinSessions)
	return m, tm
}

// vocabulary returns the lower-case words of the sessions' messages seen
// in at least min sessions, with their counts. lex may be nil.
func vocabulary(sessions []trace.Session, min int, lex *lexicon) map[string]float64 {
	all, _ := vocabularies(sessions, nil, min, lex)
	return all
}

// vocabularies returns the vocabulary of sessions and of each half of
// them (half[i] is session i's; nil: all in half 0), from one pass over
// their messages: a word's count and its number of sessions in all are
// the sums of its halves', the same integers as a pass over all.
func vocabularies(sessions []trace.Session, half []int, min int, lex *lexicon) (all map[string]float64, halves [2]map[string]float64) {
	type stat struct {
		count [2]float64
		df    [2]int32
		last  int32 // 1 + the index of the last session it was seen in
	}
	// The lexicon's words by their ids (it holds every text of the
	// sessions: Mine reads them all), in an array; the words of a text
	// it did not read, by their text.
	var lstats, stats []stat
	if lex != nil {
		lstats = make([]stat, len(lex.words))
	}
	index := make(map[string]int32)
	var h int
	var si int32
	mark := func(st *stat) {
		st.count[h]++
		if st.last != si {
			st.last = si
			st.df[h]++
		}
	}
	add := func(t string) {
		if !isWord(t) {
			return
		}
		k, ok := index[t]
		if !ok {
			k = int32(len(stats))
			index[t] = k
			stats = append(stats, stat{})
		}
		mark(&stats[k])
	}
	for i, s := range sessions {
		h, si = 0, int32(i)+1
		if half != nil {
			h = half[i]
		}
		for _, msg := range s.Messages {
			l := lex.lexed(msg.Content)
			if l == nil {
				eachToken(msg.Content, add)
				continue
			}
			// The lexicon's words are eachToken's (its dates are added
			// per replay, not here).
			for _, id := range l.wids {
				mark(&lstats[id])
			}
		}
	}
	all = make(map[string]float64)
	halves = [2]map[string]float64{make(map[string]float64), make(map[string]float64)}
	put := func(w string, st *stat) {
		if st.df[0]+st.df[1] >= int32(min) {
			all[w] += st.count[0] + st.count[1]
		}
		for h := range halves {
			if st.df[h] >= int32(min) {
				halves[h][w] += st.count[h]
			}
		}
	}
	for w, k := range index {
		put(w, &stats[k])
	}
	for id := range lstats {
		put(lex.words[id], &lstats[id])
	}
	return all, halves
}

type tableMiner struct {
	m       *Model
	session string
	tools   map[string]*ToolModel
	keySets map[string]map[string]float64 // tool -> joined keys -> count
	args    map[string]map[string]*ArgModel
	consts  map[string]map[string]*constStat // tool\x00arg -> value
	refs    []tokRef
	tfs     []string
	set     []int32
	// samples are tool choice's training calls, wordSets the sets of
	// words they heard (ids in vocab, the vocabulary's words in order),
	// ends[i] the number of samples up to session i's last.
	samples  []choiceSample
	wordSets [][]int32
	vocab    []string
	ends     []int32
}

type constStat struct {
	count    float64
	sessions int
	last     string
}

// add counts one use of the constant, in session.
func (cs *constStat) add(session string) {
	cs.count++
	if cs.last != session {
		cs.last, cs.sessions = session, cs.sessions+1
	}
}

func newTableMiner(m *Model) *tableMiner {
	return &tableMiner{m: m, tools: make(map[string]*ToolModel), keySets: make(map[string]map[string]float64),
		args: make(map[string]map[string]*ArgModel), consts: make(map[string]map[string]*constStat)}
}

func (tm *tableMiner) call(st *state, ev trace.Event) {
	t := tm.tools[ev.Tool]
	if t == nil {
		t = &ToolModel{Name: ev.Tool, Words: make(map[string]float64)}
		tm.tools[ev.Tool] = t
		tm.keySets[ev.Tool] = make(map[string]float64)
		tm.args[ev.Tool] = make(map[string]*ArgModel)
	}
	t.Calls++
	flag := "0"
	if st.spoke {
		flag = "1"
	}
	ctx := st.prev + "|" + flag
	if tm.m.Seq[ctx] == nil {
		tm.m.Seq[ctx] = make(map[string]float64)
	}
	tm.m.Seq[ctx][ev.Tool]++
	// The model's words are features of their own: ids after the
	// vocabulary's (fitToolWords).
	set := st.toolWords
	if st.modelHeard() {
		nw := int32(len(st.c.words))
		set = append(tm.set[:0], st.toolWords...)
		for _, w := range st.modelWords {
			set = append(set, nw+w)
		}
		tm.set = set // scratch: kept below only if new
	}
	if n := len(tm.wordSets); n == 0 || !slices.Equal(tm.wordSets[n-1], set) {
		tm.wordSets = append(tm.wordSets, slices.Clone(set))
	}
	tm.samples = append(tm.samples, choiceSample{prev: st.prev, spoke: st.spoke, words: len(tm.wordSets) - 1, tool: ev.Tool})
	// toolWords hold ids of the compiled vocabulary; spell them back.
	for _, id := range st.toolWords {
		t.Words[st.c.word(id)]++
		t.WordTotal++
	}
	// The arguments as the lexicon read them, once for every replay.
	ca := st.lex.call(ev.Args)
	if ca == nil || ca.mined == nil {
		ca = parseCall(ev.Args, true)
	}
	if !ca.ok {
		return
	}
	ma := ca.mined
	tm.keySets[ev.Tool][ma.keys]++
	switch {
	case !ma.sameOK:
	case ma.same:
		t.SameCalls++
	default:
		t.DistinctCalls++
	}
	for i := range ca.args {
		k, mv := ca.args[i].name, &ma.vals[i]
		a := tm.args[ev.Tool][k]
		if a == nil {
			a = &ArgModel{Name: k, Kinds: make(map[string]float64), Shapes: make(map[string]float64), Classes: make(map[string]float64),
				Lengths: make(map[string]float64), Transforms: make(map[string]float64), Near: make(map[string]float64)}
			tm.args[ev.Tool][k] = a
		}
		a.Count++
		if mv.canonOK {
			ck := ev.Tool + "\x00" + k
			if tm.consts[ck] == nil {
				tm.consts[ck] = make(map[string]*constStat)
			}
			cs := tm.consts[ck][mv.canon]
			if cs == nil {
				cs = &constStat{}
				tm.consts[ck][mv.canon] = cs
			}
			cs.add(tm.session)
		}
		a.Kinds[mv.kind]++
		if mv.scalarOK {
			tm.find(st, a, mv.v)
		}
	}
}

// find looks for the value v of argument a in the window and records how
// the most recent mention looked.
func (tm *tableMiner) find(st *state, a *ArgModel, v string) {
	if v == "" || len(v) > maxTokenLen {
		return
	}
	tm.refs = st.index.appendRefs(st.index.appendRefs(tm.refs[:0], normKey(v)), "\x00"+v)
	best, bestTfs := tm.latest(v)
	if best.seg == nil {
		// A date a day off, only where the date itself was not said.
		tm.refs = tm.refs[:0]
		for _, d := range [...]int{-1, 1} {
			if w, ok := shiftDate(v, d); ok {
				tm.refs = st.index.appendRefs(tm.refs, w)
			}
		}
		best, bestTfs = tm.latest(v)
	}
	if best.seg == nil {
		return
	}
	tk := best.seg.toks[best.i]
	text := best.seg.str(best.i)
	a.Found++
	a.Shapes[shape(text)]++
	a.Classes[classString(tk.bits)]++
	a.Lengths[lengthBucket(len(text))]++
	for _, tf := range bestTfs {
		a.Transforms[tf] += 1 / float64(len(bestTfs))
	}
	best.seg.near(best.i, func(w int32) {
		a.Near[st.c.word(w)]++
		a.NearTotal++
	})
}

// latest returns the most recent of tm.refs that some normalisations
// turn into v, and those normalisations.
func (tm *tableMiner) latest(v string) (tokRef, []string) {
	var best tokRef
	var bestTfs []string
	for _, r := range tm.refs {
		if r.seg.dropped {
			continue
		}
		tm.tfs = transformOf(r.seg.str(r.i), v, tm.tfs[:0])
		if len(tm.tfs) == 0 {
			continue
		}
		if best.seg == nil || r.seg.n > best.seg.n || (r.seg.n == best.seg.n && r.i > best.i) {
			best = r
			bestTfs = append(bestTfs[:0], tm.tfs...)
		}
	}
	return best, bestTfs
}

// Arguments whose values the conversation gave less often than this are
// not read from it (their candidates would be noise).
const (
	minFound     = 3
	minFoundRate = 0.05
	minConstRate = 0.02
	minKeySet    = 0.1
)

func (tm *tableMiner) finish(minSessions int) {
	names := make([]string, 0, len(tm.tools))
	for n := range tm.tools {
		names = append(names, n)
	}
	sort.Strings(names)
	vocab := tm.m.Words
	for _, n := range names {
		t := tm.tools[n]
		for w := range t.Words {
			if _, ok := vocab[w]; !ok {
				t.WordTotal -= t.Words[w]
				delete(t.Words, w)
			}
		}
		type kc struct {
			k string
			c float64
		}
		var kss []kc
		for k, c := range tm.keySets[n] {
			kss = append(kss, kc{k, c})
		}
		slices.SortFunc(kss, func(a, b kc) int {
			if a.c != b.c {
				return cmp.Compare(b.c, a.c)
			}
			return strings.Compare(a.k, b.k)
		})
		for i, ks := range kss {
			if i > 0 && (i >= 3 || ks.c < minKeySet*t.Calls) {
				break
			}
			var keys []string
			if ks.k != "" {
				keys = strings.Split(ks.k, "\x00")
			}
			t.KeySets = append(t.KeySets, KeySet{Keys: keys, Count: ks.c})
		}
		argNames := make([]string, 0, len(tm.args[n]))
		for k := range tm.args[n] {
			argNames = append(argNames, k)
		}
		sort.Strings(argNames)
		for _, k := range argNames {
			a := tm.args[n][k]
			if a.Found < minFound || a.Found < minFoundRate*a.Count {
				a.Found, a.Shapes, a.Classes, a.Lengths, a.Transforms, a.Near, a.NearTotal = 0, nil, nil, nil, nil, nil, 0
			} else {
				for w := range a.Near {
					if _, ok := vocab[w]; !ok {
						a.NearTotal -= a.Near[w]
						delete(a.Near, w)
					}
				}
			}
			for v, cs := range tm.consts[n+"\x00"+k] {
				if cs.sessions >= minSessions && cs.count >= minConstRate*a.Count {
					a.Consts = append(a.Consts, Const{Value: json.RawMessage(v), Count: cs.count})
				}
			}
			slices.SortFunc(a.Consts, func(x, y Const) int {
				if x.Count != y.Count {
					return cmp.Compare(y.Count, x.Count)
				}
				return strings.Compare(string(x.Value), string(y.Value))
			})
			if len(a.Consts) > 8 {
				a.Consts = a.Consts[:8]
			}
			t.Args = append(t.Args, a)
		}
		tm.m.Tools = append(tm.m.Tools, t)
	}
}

// instance is one argument of one call: its candidates' features and
// which one was sent (-1: none of them).
type instance struct {
	x     [][nFeat]float64
	label int
}

const maxInstanceCands = 64

// instances replays the sessions with a compiled model and returns the
// training instances of the value scorer.
func instances(c *compiled, sessions []trace.Session, maxBytes int, lex *lexicon) []instance {
	var out []instance
	var sc scratch
	r := newReplay(lex, false)
	for _, s := range sessions {
		st := r.state(c, maxBytes, s)
		for ev := range trace.Known(s) {
			if ev.IsMessage() {
				st.hear(ev)
				continue
			}
			ti, ok := c.byName[ev.Tool]
			var ca *callArgs
			if ok {
				// The arguments as the lexicon read them.
				if ca = st.lex.call(ev.Args); ca == nil || ca.mined == nil {
					ca = parseCall(ev.Args, true)
				}
			}
			if ok && ca.ok {
				t := c.tools[ti]
				// In a fixed order (by name): the instances' order is the
				// order of the gradient's float sums, and the model must
				// come out byte-identical run to run.
				for i := range ca.args {
					a := t.args[ca.args[i].name]
					if a == nil {
						continue
					}
					cs := st.candidates(a, &sc)
					if len(cs) == 0 {
						continue
					}
					want, wok := ca.mined.vals[i].h, ca.mined.vals[i].hOK
					slices.SortStableFunc(cs, func(x, y scored) int { return cmp.Compare(y.score, x.score) })
					in := instance{label: -1}
					for i := range cs {
						if wok && cs[i].h == want {
							in.label = len(in.x)
						} else if i >= maxInstanceCands {
							continue
						}
						in.x = append(in.x, st.features(a, &cs[i]))
					}
					out = append(out, in)
				}
			}
			st.observe(ev)
		}
	}
	return out
}

// valueJSON returns the JSON of a value as candidates spell it.
func valueJSON(raw json.RawMessage) string {
	var s string
	if len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &s) == nil {
		b, _ := json.Marshal(s)
		return string(b)
	}
	if c, ok := canonValue(raw); ok {
		return c
	}
	return string(raw)
}
