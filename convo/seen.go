package convo

import (
	"cmp"
	"encoding/json"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/ahead-dev/ahead/trace"
)

// What a Fresh predictor learns of the tools from the calls it observes
// (issue 24 item 2): their names, argument names, key sets, what their
// values look like and where in the conversation they were found. It is
// kept in memory only (never written to a pool), bounded by the limits
// below, and turned into a Model (synth) whose weights are the built-in
// default's.

// Bounds of what a Fresh predictor keeps of the tools it saw. Beyond
// them, new tools, arguments, key sets and values are not counted (those
// already counted go on counting).
const (
	maxSeenTools   = 512
	maxSeenArgs    = 64 // per tool
	maxSeenKeySets = 64 // per tool
	maxSeenValues  = 64 // per argument: shapes, classes, lengths, constants each
	maxSeenSeq     = 8192
)

type seenArg struct {
	count  float64
	found  float64 // values a token of the window gave
	kinds  map[string]float64
	shapes map[string]float64 // of the mention that gave the value, else of the value
	class  map[string]float64
	length map[string]float64
	tfs    map[string]float64
	consts map[string]*constStat
}

type seenTool struct {
	calls          float64
	keySets        map[string]float64
	same, distinct float64
	args           map[string]*seenArg
}

// seen is what a Fresh predictor learnt of the tools.
type seen struct {
	tools map[string]*seenTool
	seq   map[string]map[string]float64
	nseq  int
	calls int
	// grew says a tool, an argument or a key set appeared since the
	// last synth: the model must be made again for it to be predicted.
	grew bool
	tfs  []string
	hs   []uint64
}

func newSeen() *seen {
	return &seen{tools: make(map[string]*seenTool), seq: make(map[string]map[string]float64)}
}

// addCount adds n to m[k] unless k is new and m is full.
func addCount(m map[string]float64, k string, n float64) {
	if _, ok := m[k]; ok || len(m) < maxSeenValues {
		m[k] += n
	}
}

// call counts a call of session, made in the state st (before st
// observes it: the window is what the agent had when it made the call).
func (s *seen) call(st *state, session string, ev trace.Event) {
	t := s.tools[ev.Tool]
	if t == nil {
		if len(s.tools) >= maxSeenTools {
			return
		}
		t = &seenTool{keySets: make(map[string]float64), args: make(map[string]*seenArg)}
		s.tools[ev.Tool] = t
		s.grew = true
	}
	t.calls++
	s.calls++
	flag := "0"
	if st.spoke {
		flag = "1"
	}
	ctx := st.prev + "|" + flag
	if s.seq[ctx] == nil && s.nseq < maxSeenSeq {
		s.seq[ctx] = make(map[string]float64)
	}
	if m := s.seq[ctx]; m != nil {
		if _, ok := m[ev.Tool]; !ok {
			s.nseq++
		}
		m[ev.Tool]++
	}
	var args map[string]json.RawMessage
	if json.Unmarshal(ev.Args, &args) != nil {
		return
	}
	keys := slices.Sorted(maps.Keys(args))
	ks := strings.Join(keys, "\x00")
	if _, ok := t.keySets[ks]; ok || len(t.keySets) < maxSeenKeySets {
		if !ok {
			s.grew = true
		}
		t.keySets[ks]++
	}
	s.countSame(t, args, keys)
	for _, k := range keys {
		a := t.args[k]
		if a == nil {
			if len(t.args) >= maxSeenArgs {
				continue
			}
			a = &seenArg{kinds: make(map[string]float64), shapes: make(map[string]float64), class: make(map[string]float64),
				length: make(map[string]float64), tfs: make(map[string]float64), consts: make(map[string]*constStat)}
			t.args[k] = a
			s.grew = true
		}
		a.count++
		raw := args[k]
		if cv, ok := canonValue(raw); ok {
			cs := a.consts[cv]
			if cs == nil && len(a.consts) < maxSeenValues {
				cs = &constStat{}
				a.consts[cv] = cs
			}
			if cs != nil {
				cs.add(session)
			}
		}
		v, kind, ok := scalar(raw)
		a.kinds[kind]++
		if ok {
			s.find(st, a, v)
		}
	}
}

// countSame counts whether two of a call's scalar values were equal, as
// tableMiner.countSame does.
func (s *seen) countSame(t *seenTool, args map[string]json.RawMessage, keys []string) {
	var same, ok bool
	s.hs, same, ok = sameValues(s.hs, args, keys)
	switch {
	case !ok:
	case same:
		t.same++
	default:
		t.distinct++
	}
}

// find looks for value v in st's window, the most recent mention first,
// and counts how the mention looked; a value not found there counts its
// own look, so that a tool seen once already knows what its values look
// like. The scan is of the window (bounded by its bytes), without the
// index a miner keeps.
func (s *seen) find(st *state, a *seenArg, v string) {
	if v == "" || len(v) > maxTokenLen {
		return
	}
	key := normKey(v)
	for si := len(st.segs) - 1; si >= 0; si-- {
		seg := st.segs[si]
		for i := int32(len(seg.toks)) - 1; i >= 0; i-- {
			t := seg.str(i)
			if len(t) < len(v)/2 || normKey(t) != key && !strings.Contains(t, v) {
				continue
			}
			s.tfs = transformOf(t, v, s.tfs[:0])
			if len(s.tfs) == 0 {
				continue
			}
			a.found++
			addCount(a.shapes, shape(t), 1)
			addCount(a.class, classString(seg.toks[i].bits), 1)
			addCount(a.length, lengthBucket(len(t)), 1)
			for _, tf := range s.tfs {
				addCount(a.tfs, tf, 1/float64(len(s.tfs)))
			}
			return
		}
	}
	addCount(a.shapes, shape(v), 1)
	addCount(a.class, classString(classBits(v)), 1)
	addCount(a.length, lengthBucket(len(v)), 1)
}

// nameWords returns the lower-case words of an identifier: "order_id",
// "orderId" and "order-id" are order, id. Only words isWord keeps.
func nameWords(name string) []string {
	var out []string
	var b strings.Builder
	flush := func() {
		if w := b.String(); isWord(w) && !slices.Contains(out, w) {
			out = append(out, w)
		}
		b.Reset()
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z':
			b.WriteByte(c)
		case c >= 'A' && c <= 'Z':
			if i > 0 && name[i-1] >= 'a' && name[i-1] <= 'z' {
				flush()
			}
			b.WriteByte(c + 'a' - 'A')
		default:
			flush()
		}
	}
	flush()
	return out
}

// synth makes the Model a Fresh predictor serves: the tools seen, with
// the default's weights, calibration and weight of the words.
func (s *seen) synth(d *Default) *Model {
	m := &Model{Version: ModelVersion, MinSessions: 1, Words: make(map[string]float64), Seq: s.seq,
		Lambda: d.Lambda, ToolWords: toolWordsLogit, Weights: slices.Clone(d.Weights), Calibration: d.Calibration}
	for _, name := range slices.Sorted(maps.Keys(s.tools)) {
		st := s.tools[name]
		tm := &ToolModel{Name: name, Calls: st.calls, SameCalls: st.same, DistinctCalls: st.distinct, WordWeights: make(map[string]float64)}
		for _, w := range nameWords(name) {
			m.Words[w]++
			tm.WordWeights[w] = 1
		}
		type kc struct {
			k string
			c float64
		}
		var kss []kc
		for k, c := range st.keySets {
			kss = append(kss, kc{k, c})
		}
		slices.SortFunc(kss, func(a, b kc) int {
			if a.c != b.c {
				return cmp.Compare(b.c, a.c)
			}
			return strings.Compare(a.k, b.k)
		})
		for i, ks := range kss {
			if i > 0 && (i >= 3 || ks.c < minKeySet*st.calls) {
				break
			}
			var keys []string
			if ks.k != "" {
				keys = strings.Split(ks.k, "\x00")
			}
			tm.KeySets = append(tm.KeySets, KeySet{Keys: keys, Count: ks.c})
		}
		for _, an := range slices.Sorted(maps.Keys(st.args)) {
			sa := st.args[an]
			for _, w := range nameWords(an) {
				m.Words[w]++
			}
			var shapes float64
			for _, n := range sa.shapes {
				shapes += n
			}
			am := &ArgModel{Name: an, Count: sa.count, Kinds: sa.kinds, Found: shapes, Shapes: sa.shapes, Classes: sa.class,
				Lengths: sa.length, Transforms: sa.tfs}
			if len(am.Transforms) == 0 {
				// Nothing found yet: the values as written.
				am.Transforms = map[string]float64{tfSame: 1}
			}
			for v, cs := range sa.consts {
				if cs.sessions >= 2 && cs.count >= minConstRate*sa.count {
					am.Consts = append(am.Consts, Const{Value: json.RawMessage(v), Count: cs.count})
				}
			}
			slices.SortFunc(am.Consts, func(x, y Const) int {
				if x.Count != y.Count {
					return cmp.Compare(y.Count, x.Count)
				}
				return strings.Compare(string(x.Value), string(y.Value))
			})
			if len(am.Consts) > 8 {
				am.Consts = am.Consts[:8]
			}
			tm.Args = append(tm.Args, am)
		}
		m.Tools = append(m.Tools, tm)
	}
	return m
}

// compileSynth compiles a model synth made, then sets what the counts
// alone do not say: the share of each argument's values the conversation
// gave (Found counts the values' own looks too), and the argument's own
// name words as words near its values, worth d.NameNear each.
func compileSynth(m *Model, s *seen, d *Default) *compiled {
	c := compile(m)
	for _, ca := range c.args {
		t := c.tools[ca.tool].t
		sa := s.tools[t.Name].args[ca.a.Name]
		ca.logFound = logShareFound(sa.found, sa.count)
		for i := range ca.near {
			ca.near[i] = 0
		}
		for _, w := range nameWords(ca.a.Name) {
			if id, ok := c.vocab[w]; ok {
				ca.near[id] = d.NameNear
			}
		}
	}
	return c
}

func logShareFound(found, count float64) float64 {
	return math.Log((found + 1) / (count + 2))
}
