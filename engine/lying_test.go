package engine_test

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/policy"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/speculator"
	"github.com/ahead-dev/ahead/trace"
)

// liar is an OpenAI-compatible chat completions server playing a fast
// model that guesses badly. It knows every session's script (it finds the
// session's name in the conversation and the next call's seq in the calls
// shown), and answers each request, by a draw that depends only on the
// session and the seq, with one of the kinds below. Only "right" and
// "late" ever hold the true next calls.
type liar struct {
	seed    uint64
	scripts map[string][]call // flattened

	mu    sync.Mutex // protects kinds
	kinds map[string]int
}

// The kinds of answers, with their weights out of 100.
var lies = []struct {
	kind   string
	weight int
}{
	{"right", 25},   // the next calls, exactly
	{"wrong", 15},   // other calls of the store, with valid arguments
	{"unsafe", 15},  // writes: the true next write if there is one, and others
	{"badargs", 10}, // arguments that fail the schema or are no JSON object
	{"unknown", 5},  // tools the agent does not have, or not functions
	{"garbage", 15}, // no chat completion: bad JSON, no choices, 500, 429, 400
	{"slow", 5},     // the next calls, after the request's timeout
	{"late", 10},    // the next calls, after the agent has most likely called
}

var sessionName = regexp.MustCompile(`s\d{5}`)

func (l *liar) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body struct {
		Messages []struct {
			Content   any `json:"content"`
			ToolCalls []struct {
				ID string `json:"id"`
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	session, next := "", 0
	for _, m := range body.Messages {
		if s, ok := m.Content.(string); ok && session == "" {
			session = sessionName.FindString(s)
		}
		for _, c := range m.ToolCalls {
			if n, err := strconv.Atoi(strings.TrimPrefix(c.ID, "call_")); err == nil {
				next = max(next, n+1)
			}
		}
	}
	h := fnv.New64a()
	fmt.Fprint(h, session, next)
	rng := rand.New(rand.NewPCG(l.seed, h.Sum64()))
	kind := ""
	for x := rng.IntN(100); kind == ""; {
		for _, k := range lies {
			if x < k.weight {
				kind = k.kind
				break
			}
			x -= k.weight
		}
	}
	l.mu.Lock()
	l.kinds[kind]++
	l.mu.Unlock()

	script := l.scripts[session]
	truth := script[min(next, len(script)):min(next+3, len(script))]
	var calls []call
	status, delay := http.StatusOK, time.Duration(50+rng.IntN(350))*time.Millisecond
	switch kind {
	case "right", "slow", "late":
		calls = truth
		if kind == "slow" {
			delay = 3 * time.Second // the speculator gives up after 2 s
		} else if kind == "late" {
			delay = time.Duration(1500+rng.IntN(400)) * time.Millisecond
		}
	case "wrong":
		for range 3 {
			calls = append(calls, randomCall(rng))
		}
	case "unsafe":
		for _, c := range truth {
			if !kvPolicy(true).Lookup(c.tool).IsReadOnly() {
				calls = append(calls, c)
			}
		}
		for len(calls) < 3 {
			if c := randomCall(rng); !kvPolicy(true).Lookup(c.tool).IsReadOnly() {
				calls = append(calls, c)
			}
		}
	case "badargs":
		calls = []call{
			{"get", `{"key":5}`}, {"mget", `{"keys":"d/k1"}`}, {"put", `{"val":"1"}`},
			{"get", `["d/k1"]`}, {"peek", `"d/k1"`}, {"scan", `{"unclosed":`},
		}
		rng.Shuffle(len(calls), func(i, j int) { calls[i], calls[j] = calls[j], calls[i] })
		calls = calls[:3]
	case "unknown":
		calls = []call{{"rm_rf", `{"path":"/"}`}, {"get ", `{"key":"d/k1"}`}, {"GET", `{"key":"d/k1"}`}}
	case "garbage":
		switch rng.IntN(5) {
		case 0:
			l.reply(w, status, delay, `{"id":"x","choices":[{"message":{"tool_calls":[{"function":`)
		case 1:
			l.reply(w, status, delay, `{"id":"x","object":"chat.completion","choices":[]}`)
		case 2:
			l.reply(w, http.StatusInternalServerError, delay, `{"error":{"message":"overloaded"}}`)
		case 3:
			w.Header().Set("Retry-After", "1")
			l.reply(w, http.StatusTooManyRequests, delay, `{"error":{"message":"slow down"}}`)
		default:
			l.reply(w, http.StatusBadRequest, delay, `{"error":{"message":"no such model"}}`)
		}
		return
	}
	var tcs []string
	for i, c := range calls {
		typ := "function"
		if kind == "unknown" && i == 2 {
			typ = "custom"
		}
		args, _ := json.Marshal(c.args)
		tcs = append(tcs, fmt.Sprintf(`{"id":"g%d","type":%q,"function":{"name":%q,"arguments":%s}}`, i, typ, c.tool, args))
	}
	l.reply(w, status, delay, `{"id":"x","object":"chat.completion","created":1,"model":"liar","choices":[{"index":0,"finish_reason":"tool_calls",`+
		`"message":{"role":"assistant","content":null,"tool_calls":[`+strings.Join(tcs, ",")+`]}}],"usage":{"prompt_tokens":100,"completion_tokens":20,"total_tokens":120}}`)
}

func (l *liar) reply(w http.ResponseWriter, status int, delay time.Duration, body string) {
	time.Sleep(delay)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, body)
}

// inMemory serves requests with a handler in the caller's goroutine, so
// that the synctest bubble's fake clock governs the server too.
type inMemory struct{ h http.Handler }

func (t inMemory) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, r)
	if err := r.Context().Err(); err != nil {
		return nil, err
	}
	res := rec.Result()
	res.Request = r
	return res, nil
}

// kvTools are the store's tools as the speculator describes them to the
// model, with their argument schemas.
func kvTools() []speculator.Tool {
	str := `{"type":"string"}`
	obj := func(props map[string]string, required ...string) []byte {
		var ps []string
		for _, name := range slices.Sorted(func(yield func(string) bool) {
			for k := range props {
				if !yield(k) {
					return
				}
			}
		}) {
			ps = append(ps, fmt.Sprintf("%q:%s", name, props[name]))
		}
		req, _ := json.Marshal(required)
		if required == nil {
			req = []byte("[]")
		}
		return []byte(`{"type":"object","properties":{` + strings.Join(ps, ",") + `},"required":` + string(req) + `}`)
	}
	key := obj(map[string]string{"key": str}, "key")
	return []speculator.Tool{
		{Name: "get", Schema: key}, {Name: "peek", Schema: key}, {Name: "slow", Schema: key}, {Name: "feed", Schema: key},
		{Name: "mget", Schema: obj(map[string]string{"keys": `{"type":"array","items":{"type":"string"}}`}, "keys")},
		{Name: "scan", Schema: obj(nil)}, {Name: "bump", Schema: obj(nil)},
		{Name: "put", Schema: obj(map[string]string{"key": str, "val": str}, "key", "val")},
		{Name: "move", Schema: obj(map[string]string{"src": str, "dst": str}, "src", "dst")},
		{Name: "drop", Schema: key}, {Name: "nget", Schema: key},
		{Name: "nput", Schema: obj(map[string]string{"key": str, "val": str}, "key", "val")},
	}
}

// TestLosslessLyingSpeculator is the differential test with a fast model
// that lies: sessions with messages replayed without speculation and with a
// speculator (the real one, over HTTP) whose answers are right, wrong,
// unsafe, malformed, garbage, too slow or late. Every agent sees exactly
// what it saw without speculation (feeds, written behind ahead's back, are
// held to the volatile rule by the stale check instead), no unsafe tool
// runs speculatively though the speculator names many, and the lies cost
// only metrics. Sessions run one at a time, so that what an agent sees
// depends only on its own calls, not on how the sessions interleave, and
// each backend has more slots than speculation may hold (SpecBudget 6; a
// run of a tool that cannot be cancelled keeps its slot) plus a step's
// calls, so that no call of a step waits for another: a write and a read
// issued together may see each other in either order, and would make the
// comparison moot.
func TestLosslessLyingSpeculator(t *testing.T) {
	const sessions, steps, seed = 400, 4, 3
	pol := kvPolicy(true)
	base := run{sessions: sessions, steps: steps, seed: seed, pol: pol, live: 1, slots: 6 + 3, messages: true}
	var off runResult
	synctest.Test(t, func(t *testing.T) { off = runSessions(t, base) })

	synctest.Test(t, func(t *testing.T) {
		// The scripts as runSessions draws them, for the liar.
		r := rand.New(rand.NewPCG(seed, 0))
		l := &liar{seed: seed, scripts: map[string][]call{}, kinds: map[string]int{}}
		scripts := map[string][][]call{}
		for i := range sessions {
			name := fmt.Sprintf("s%05d", i)
			scripts[name] = script(r, steps)
			l.scripts[name] = slices.Concat(scripts[name]...)
		}
		var (
			eng         *engine.Engine
			mu          sync.Mutex
			unsafeNamed int // unsafe guesses that reached the engine
			refused     int // answers the engine refused as late
		)
		reg := prometheus.NewRegistry()
		sp, err := speculator.New(&speculator.Options{
			BaseURL:    "http://liar.test/v1",
			Model:      "liar",
			Timeout:    2 * time.Second,
			Tools:      kvTools,
			HTTPClient: &http.Client{Transport: inMemory{l}},
			Registerer: reg,
			Offer: func(session string, seq int, preds []predict.Prediction) bool {
				mu.Lock()
				for _, p := range preds {
					if pol.Lookup(p.Tool).Level() == policy.LevelNone {
						unsafeNamed++
					}
				}
				mu.Unlock()
				if !eng.Offer(session, seq, preds) {
					mu.Lock()
					refused++
					mu.Unlock()
					return false
				}
				return true
			},
			Conversation: func(session string) []trace.Event { return eng.Conversation(session) },
		})
		if err != nil {
			t.Fatal(err)
		}
		o := base
		o.speculate = true
		o.predictor = sp
		o.onEngine = func(e *engine.Engine) { eng = e }
		on := runSessions(t, o)
		sp.Close()

		if on.stale > 0 || off.stale > 0 {
			t.Errorf("stale results: %d with the speculator, %d without; first: %s", on.stale, off.stale, strings.Join(append(on.first, off.first...), "\n\t"))
		}
		if len(on.forbidden) > 0 {
			t.Errorf("tools %v ran speculatively; the policy forbids them", on.forbidden)
		}
		// Two identical calls of one step finish together, in either
		// order: within a step, the outputs of each call are compared as
		// a set.
		diffs := 0
		for name, want := range off.outputs {
			for j, step := range want {
				by := func(outs []string) map[call][]string {
					m := map[call][]string{}
					for ci, out := range outs {
						if c := scripts[name][j][ci]; c.tool != "feed" {
							m[c] = append(m[c], out)
							slices.Sort(m[c])
						}
					}
					return m
				}
				got, want := by(on.outputs[name][j]), by(step)
				for c, w := range want {
					if g := got[c]; !slices.Equal(g, w) {
						if diffs++; diffs <= 3 {
							t.Errorf("%s step %d: %s%s saw %q with the speculator, %q without", name, j, c.tool, c.args, g, w)
						}
					}
				}
			}
		}
		if diffs > 3 {
			t.Errorf("... %d differences in all", diffs)
		}

		// The test proves something only if the speculator's guesses were
		// used, its unsafe guesses reached the engine, and every kind of
		// lie was told and counted.
		st := on.st.Origins[predict.OriginSpeculator]
		if st.Reused+st.Promoted < sessions/4 || unsafeNamed < sessions/4 {
			t.Errorf("too little to prove anything: speculator origin %+v, %d unsafe guesses offered", st, unsafeNamed)
		}
		failures := map[string]float64{}
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "ahead_speculator_failures_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, lp := range m.GetLabel() {
					if lp.GetName() == "reason" {
						failures[lp.GetValue()] += m.GetCounter().GetValue()
					}
				}
			}
		}
		for _, reason := range []string{speculator.ReasonBadJSON, speculator.ReasonNoGuesses, speculator.ReasonDown, speculator.ReasonRateLimited,
			speculator.ReasonStatus, speculator.ReasonTimeout, speculator.ReasonUnknownTool, speculator.ReasonBadArgs, speculator.ReasonSchema} {
			if failures[reason] == 0 {
				t.Errorf("no failure counted as %s; counted %v", reason, failures)
			}
		}
		if sst := sp.Stats(); refused == 0 || sst.Late < int64(refused) {
			t.Errorf("%d answers refused as late by the engine, speculator %+v: want some, all counted late", refused, sst)
		}
		t.Logf("answers %v; failures %v; speculator %+v; origin %+v; %d unsafe guesses offered, %d answers refused as late; engine %d calls, %d reused, %d promoted, outcomes %v",
			l.kinds, failures, sp.Stats(), st, unsafeNamed, refused, on.st.Calls, on.st.Reused, on.st.Promoted, on.st.Outcomes)
	})
}
