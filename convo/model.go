package convo

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
)

// ModelVersion is the version of the Model format this package writes.
const ModelVersion = 1

// Model is what Mine learns: statistics of words, shapes and counts, no
// message text. It serialises to JSON (encoding/json, deterministic) so
// that it can sit in a pool file.
type Model struct {
	Version int `json:"version"`
	// MinSessions is the least number of sessions a word was seen in.
	MinSessions int `json:"min_sessions"`
	// Words are the vocabulary: lower-case alphabetic words seen in at
	// least MinSessions sessions, with their counts in messages.
	Words map[string]float64 `json:"words"`
	// Seq counts the tools called after each context: "prev|u" where prev
	// is the previous call's signature (tool:status) or "start", and u is
	// 1 if the user spoke since that call, else 0.
	Seq map[string]map[string]float64 `json:"seq"`
	// Lambda weighs the words against the call sequence in tool choice.
	Lambda float64 `json:"lambda"`
	// ToolWords says how the words weigh in tool choice: "" by naive
	// Bayes from ToolModel.Words, "logit" by ToolModel.WordWeights.
	ToolWords string       `json:"tool_words,omitempty"`
	Tools     []*ToolModel `json:"tools"`
	// Weights score an argument's candidate values (see features).
	Weights []float64 `json:"weights"`
	// Calibration maps a raw score to the hit rate observed on sessions
	// the model was not fitted on: the first point whose Raw is at least
	// the score gives P. There is one map per stratum: "user" when the
	// user spoke since the previous call, "call" otherwise, since the
	// same score means more right after the user spoke.
	Calibration map[string][]CalPoint `json:"calibration"`
}

// toolWordsLogit is Model.ToolWords for weights learned by logistic
// regression (fitToolWords).
const toolWordsLogit = "logit"

// CalPoint is one step of the isotonic calibration map.
type CalPoint struct {
	Raw float64 `json:"raw"`
	P   float64 `json:"p"`
	N   int     `json:"n"`
}

// ToolModel is what was learned of one tool.
type ToolModel struct {
	Name  string  `json:"name"`
	Calls float64 `json:"calls"`
	// Words counts the words heard before the tool's calls (tool choice).
	Words     map[string]float64 `json:"words,omitempty"`
	WordTotal float64            `json:"word_total"`
	// WordWeights are the logistic regression's weights of the words
	// for this tool (Model.ToolWords "logit"), beyond the call sequence.
	WordWeights map[string]float64 `json:"word_weights,omitempty"`
	// ModelWordWeights are the same regression's weights of the words of
	// the model's latest message (the reply the user answers, or the
	// text of the turn that made the previous calls), beyond the call
	// sequence and the user's words. A pool mined before they existed has
	// none: tool choice then reads the user's words alone.
	ModelWordWeights map[string]float64 `json:"model_word_weights,omitempty"`
	KeySets          []KeySet           `json:"key_sets"`
	// SameCalls and DistinctCalls count the calls with two or more
	// scalar argument values where some two were equal, and where none
	// were. Both zero (a model mined before they were counted): no rule.
	SameCalls     float64     `json:"same_calls,omitempty"`
	DistinctCalls float64     `json:"distinct_calls,omitempty"`
	Args          []*ArgModel `json:"args"`
}

// KeySet is a set of argument names the tool was called with.
type KeySet struct {
	Keys  []string `json:"keys"`
	Count float64  `json:"count"`
}

// ArgModel is what was learned of one argument of a tool.
type ArgModel struct {
	Name  string  `json:"name"`
	Count float64 `json:"count"`
	// Kinds counts the JSON kinds of the values: string, number, other.
	Kinds map[string]float64 `json:"kinds"`
	// Found counts the values that a token of the conversation (or an
	// earlier call's argument) gave; the maps below describe those tokens.
	Found      float64            `json:"found"`
	Shapes     map[string]float64 `json:"shapes,omitempty"`
	Classes    map[string]float64 `json:"classes,omitempty"`
	Lengths    map[string]float64 `json:"lengths,omitempty"`
	Transforms map[string]float64 `json:"transforms,omitempty"`
	Near       map[string]float64 `json:"near,omitempty"`
	NearTotal  float64            `json:"near_total"`
	Consts     []Const            `json:"consts,omitempty"`
}

// Const is a constant value of an argument, with the number of calls that
// sent it.
type Const struct {
	Value json.RawMessage `json:"value"`
	Count float64         `json:"count"`
}

// ErrVersion is returned when a serialised model is of another version.
var ErrVersion = errors.New("convo: model version not supported; re-mine")

// UnmarshalJSON reads a model, rejecting other versions.
func (m *Model) UnmarshalJSON(data []byte) error {
	type plain Model
	var p plain
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	if p.Version != ModelVersion {
		return fmt.Errorf("%w (model version %d, this build reads %d)", ErrVersion, p.Version, ModelVersion)
	}
	if len(p.Weights) == nFeat-1 {
		// Mined before fInitial, the last feature, existed: without it,
		// scores are what they were.
		p.Weights = append(p.Weights, 0)
	}
	if len(p.Weights) != 0 && len(p.Weights) != nFeat {
		return fmt.Errorf("convo: model has %d weights, want %d", len(p.Weights), nFeat)
	}
	*m = Model(p)
	return nil
}

// compiled is a Model in the form the predictor reads fast.
type compiled struct {
	m       *Model
	vocab   map[string]int32
	words   []string
	logBg   []float64 // log P(word) in messages
	seqCtx  map[string]seqDist
	seqFlag [2]seqDist
	seqAll  seqDist
	tools   []*cTool
	byName  map[string]int
	keys    [1 << len(classChars) / 64]uint64 // class sets any argument reads
	w       []float64
	cal     [nStrata][]CalPoint
	// args are every tool's arguments, by cArg.id.
	args []*cArg
	// shapeID numbers the shapes any argument knows.
	shapeID map[string]int32
	// logWT is logW transposed: by word id, then tool index; logMT the
	// same of the model's words (ToolModel.ModelWordWeights).
	logWT []float64
	logMT []float64
	// seqBy gives the call-sequence counts after a previous signature,
	// by whether the user spoke since.
	seqBy map[string]*[2]seqDist
	// vtab is an open-addressing table of the vocabulary by hash.
	vtab []vslot
	// shape1 is the shape id of a token of one class, by class index.
	shape1 [len(classChars)]int32
	// lgRank[r] is log(1+r).
	lgRank [maxRank + 1]float64
}

const maxRank = 255

type vslot struct {
	h  uint64
	id int32 // -1: empty
}

// wordID returns the vocabulary id of word t, whose hash is h, or -1.
func (c *compiled) wordID(t string, h uint64) int32 {
	if len(c.vtab) == 0 {
		return -1
	}
	mask := uint64(len(c.vtab) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := c.vtab[i]
		if s.id < 0 {
			return -1
		}
		if s.h == h && c.words[s.id] == t {
			return s.id
		}
	}
}

// shapeOf returns the shape id of token t of class set bits, or -1.
func (c *compiled) shapeOf(t string, bits uint16) int32 {
	if bits&(bits-1) == 0 {
		return c.shape1[bits31(bits)]
	}
	var b [16]byte
	if id, ok := c.shapeID[string(shapeBytes(t, b[:0]))]; ok {
		return id
	}
	return -1
}

// bits31 is the index of the one bit set in b.
func bits31(b uint16) int {
	n := 0
	for b > 1 {
		b >>= 1
		n++
	}
	return n
}

type seqDist struct {
	n float64
	c []float64 // by tool index
}

type cTool struct {
	t *ToolModel
	// sameKnown says the model counted equal values; logSame and
	// logDistinct are then the log shares of calls with and without.
	sameKnown            bool
	logSame, logDistinct float64
	logW                 []float64 // log P(word|tool) - log P(word), by word id
	keySets              []cKeySet
	args                 map[string]*cArg
}

type cKeySet struct {
	keys []string
	json []string // the keys as JSON strings
	args []*cArg
	logP float64
}

type cArg struct {
	id       int32
	tool     int
	a        *ArgModel
	shp      []float64 // log P(shape), by shape id
	lenLP    [nLenBuckets]float64
	tfs      []tfIdx
	constH   []uint64 // hashes of the constants' values as strings
	number   bool     // values are numbers: candidates must parse as one
	logFound float64
	keys     []uint16
	clsVal   []float64 // log P(class set), by keys' index
	logCls   map[uint16]float64
	logShp   map[string]float64
	shpMiss  float64
	logLen   map[string]float64
	lenMiss  float64
	logTf    []tfLog
	near     []float64 // log-odds of a word near a value, by word id
	consts   []cConst
}

type tfLog struct {
	tf string
	lp float64
}

type tfIdx struct {
	tf uint8 // index in transforms
	lp float64
}

type cConst struct {
	v    json.RawMessage
	logP float64
}

func logShare(m map[string]float64, total float64) (map[string]float64, float64) {
	out := make(map[string]float64, len(m))
	d := total + 0.5*float64(len(m)+1)
	for k, c := range m {
		out[k] = math.Log((c + 0.5) / d)
	}
	return out, math.Log(0.5 / d)
}

func compile(m *Model) *compiled {
	c := &compiled{m: m, vocab: make(map[string]int32, len(m.Words)), byName: make(map[string]int)}
	words := make([]string, 0, len(m.Words))
	for w := range m.Words {
		words = append(words, w)
	}
	sort.Strings(words)
	c.words = words
	var total float64
	for _, w := range words {
		total += m.Words[w]
	}
	V := float64(len(words) + 1)
	c.logBg = make([]float64, len(words))
	for i, w := range words {
		c.vocab[w] = int32(i)
		c.logBg[i] = math.Log((m.Words[w] + 0.5) / (total + 0.5*V))
	}
	for i, t := range m.Tools {
		c.byName[t.Name] = i
		ct := &cTool{t: t, args: make(map[string]*cArg), logW: make([]float64, len(words))}
		if n := t.SameCalls + t.DistinctCalls; n > 0 {
			ct.sameKnown = true
			ct.logSame = math.Log((t.SameCalls + 0.5) / (n + 1))
			ct.logDistinct = math.Log((t.DistinctCalls + 0.5) / (n + 1))
		}
		for i := range words {
			if m.ToolWords == toolWordsLogit {
				ct.logW[i] = t.WordWeights[words[i]]
				continue
			}
			ct.logW[i] = math.Log((t.Words[words[i]]+0.1)/(t.WordTotal+0.1*V)) - c.logBg[i]
		}
		for _, ks := range t.KeySets {
			ck := cKeySet{keys: ks.Keys, logP: math.Log(ks.Count / t.Calls)}
			for _, k := range ks.Keys {
				b, _ := json.Marshal(k)
				ck.json = append(ck.json, string(b))
			}
			ct.keySets = append(ct.keySets, ck)
		}
		for _, a := range t.Args {
			ca := &cArg{id: int32(len(c.args)), tool: i, a: a, number: a.Kinds["number"] > a.Kinds["string"]}
			c.args = append(c.args, ca)
			ca.logFound = math.Log((a.Found + 1) / (a.Count + 2))
			ca.logCls = make(map[uint16]float64)
			clsLog, _ := logShare(a.Classes, a.Found)
			for k, v := range clsLog {
				bits := parseClass(k)
				ca.logCls[bits] = v
				ca.keys = append(ca.keys, bits)
				c.keys[bits/64] |= 1 << (bits % 64)
			}
			sort.Slice(ca.keys, func(i, j int) bool { return ca.keys[i] < ca.keys[j] })
			ca.logShp, ca.shpMiss = logShare(a.Shapes, a.Found)
			ca.logLen, ca.lenMiss = logShare(a.Lengths, a.Found)
			tfl, _ := logShare(a.Transforms, a.Found)
			for _, tf := range transforms {
				if lp, ok := tfl[tf]; ok {
					ca.logTf = append(ca.logTf, tfLog{tf, lp})
				}
			}
			ca.near = make([]float64, len(words))
			for i, w := range words {
				lo := math.Log((a.Near[w]+0.1)/(a.NearTotal+0.1*V)) - c.logBg[i]
				ca.near[i] = max(-2, min(2, lo))
			}
			for _, k := range a.Consts {
				ca.consts = append(ca.consts, cConst{v: k.Value, logP: math.Log(k.Count / a.Count)})
			}
			ct.args[a.Name] = ca
		}
		c.tools = append(c.tools, ct)
	}
	c.seqAll = seqDist{c: make([]float64, len(m.Tools))}
	for f := range c.seqFlag {
		c.seqFlag[f] = seqDist{c: make([]float64, len(m.Tools))}
	}
	c.seqCtx = make(map[string]seqDist, len(m.Seq))
	// Sorted, so that the float sums below do not depend on map order.
	for _, ctx := range slices.Sorted(maps.Keys(m.Seq)) {
		counts := m.Seq[ctx]
		d := seqDist{c: make([]float64, len(m.Tools))}
		flag := 0
		if len(ctx) > 0 && ctx[len(ctx)-1] == '1' {
			flag = 1
		}
		for _, name := range slices.Sorted(maps.Keys(counts)) {
			n := counts[name]
			i, ok := c.byName[name]
			if !ok {
				continue
			}
			d.c[i] += n
			d.n += n
			c.seqFlag[flag].c[i] += n
			c.seqFlag[flag].n += n
			c.seqAll.c[i] += n
			c.seqAll.n += n
		}
		c.seqCtx[ctx] = d
	}
	c.w = m.Weights
	if len(c.w) != nFeat {
		c.w = defaultWeights()
	}
	c.derive()
	for i, name := range strata {
		c.cal[i] = m.Calibration[name]
	}
	if c.cal[stratumFirst] == nil {
		// A model mined before the first-call map: the user's serves.
		c.cal[stratumFirst] = c.cal[stratumUser]
	}
	return c
}

// calibrate maps a raw score to P.
// strata name the calibration maps: after a call (mid-turn), after the
// user spoke, and before the session's first call. The same raw score
// means more before a first call, when the user has just said what the
// call needs, than mid-turn, where the values often come from outputs
// this model does not read.
var strata = [nStrata]string{"call", "user", "first"}

const (
	stratumCall = iota
	stratumUser
	stratumFirst
	nStrata
)

func (c *compiled) calibrate(stratum int, raw float64) float64 {
	cal := c.cal[stratum]
	if len(cal) == 0 {
		return raw
	}
	i := sort.Search(len(cal), func(i int) bool { return cal[i].Raw >= raw })
	if i == len(cal) {
		i--
	}
	return cal[i].P
}

func (c *compiled) readsClass(bits uint16) bool {
	return c.keys[bits/64]&(1<<(bits%64)) != 0
}

// word returns the word of a vocabulary id.
func (c *compiled) word(id int32) string { return c.words[id] }

// derive builds the tables the online predictor reads by index instead of
// by name: shape ids, length buckets, transform indices, the key sets'
// arguments, constants' hashes, the transposed word table and the
// call-sequence table by previous signature.
func (c *compiled) derive() {
	c.shapeID = make(map[string]int32)
	for _, ca := range c.args {
		for shp := range ca.logShp {
			if _, ok := c.shapeID[shp]; !ok {
				c.shapeID[shp] = int32(len(c.shapeID))
			}
		}
	}
	for _, ca := range c.args {
		ca.shp = make([]float64, len(c.shapeID))
		for i := range ca.shp {
			ca.shp[i] = ca.shpMiss
		}
		for shp, lp := range ca.logShp {
			ca.shp[c.shapeID[shp]] = lp
		}
		for b := range ca.lenLP {
			ca.lenLP[b] = ca.lenMiss
			if lp, ok := ca.logLen[lengthBuckets[b]]; ok {
				ca.lenLP[b] = lp
			}
		}
		for _, k := range ca.keys {
			ca.clsVal = append(ca.clsVal, ca.logCls[k])
		}
		for _, tl := range ca.logTf {
			ca.tfs = append(ca.tfs, tfIdx{uint8(slices.Index(transforms, tl.tf)), tl.lp})
		}
		for _, k := range ca.consts {
			ca.constH = append(ca.constH, hashString(constString(k.v)))
		}
	}
	for _, ct := range c.tools {
		for i := range ct.keySets {
			ks := &ct.keySets[i]
			for _, k := range ks.keys {
				ks.args = append(ks.args, ct.args[k])
			}
		}
	}
	nt := len(c.tools)
	c.logWT = make([]float64, len(c.words)*nt)
	c.logMT = make([]float64, len(c.words)*nt)
	for ti, ct := range c.tools {
		for w, lw := range ct.logW {
			c.logWT[w*nt+ti] = lw
		}
		if mw := ct.t.ModelWordWeights; len(mw) > 0 {
			for w, word := range c.words {
				c.logMT[w*nt+ti] = mw[word]
			}
		}
	}
	c.seqBy = make(map[string]*[2]seqDist)
	for ctx, d := range c.seqCtx {
		i := strings.LastIndexByte(ctx, '|')
		if i < 0 {
			continue
		}
		prev, flag := ctx[:i], 0
		if ctx[i+1:] == "1" {
			flag = 1
		}
		b := c.seqBy[prev]
		if b == nil {
			b = new([2]seqDist)
			c.seqBy[prev] = b
		}
		b[flag] = d
	}
	for i := range c.shape1 {
		c.shape1[i] = -1
		if id, ok := c.shapeID[classChars[i:i+1]]; ok {
			c.shape1[i] = id
		}
	}
	size := 64
	for size < 2*len(c.words) {
		size *= 2
	}
	c.vtab = make([]vslot, size)
	for i := range c.vtab {
		c.vtab[i].id = -1
	}
	for id, w := range c.words {
		h := hashString(w)
		for i := h & uint64(size-1); ; i = (i + 1) & uint64(size-1) {
			if c.vtab[i].id < 0 {
				c.vtab[i] = vslot{h, int32(id)}
				break
			}
		}
	}
	for r := range c.lgRank {
		c.lgRank[r] = math.Log1p(float64(r))
	}
}
