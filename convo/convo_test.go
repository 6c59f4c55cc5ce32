package convo

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/ahead-dev/ahead/mine"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/trace"
)

func readTestdata(t testing.TB) []trace.Session {
	t.Helper()
	sessions, err := trace.Collect(trace.NewReader(nil).Events("testdata/library.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return sessions
}

func mineTestdata(t testing.TB) *Model {
	t.Helper()
	m, err := Mine(readTestdata(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func msg(session, role, content string) trace.Event {
	return trace.Event{Kind: trace.KindMessage, Session: session, Role: role, Content: content}
}

func call(session, tool, args string) trace.Event {
	return trace.Event{Session: session, Tool: tool, Args: json.RawMessage(args), Status: trace.StatusOK}
}

func TestPredict(t *testing.T) {
	m := mineTestdata(t)
	tests := []struct {
		name  string
		steps []trace.Event // the last one's predictions are checked
		want  string        // tool and canonical args of a top-3 prediction
	}{
		{
			name: "first call from what the user said",
			steps: []trace.Event{
				msg("s", "system", "You are a library assistant."),
				msg("s", "user", "Hello, I want to renew a loan. My member id is ola_nordmann_8812."),
			},
			want: `lookup_member{"member_id":"ola_nordmann_8812"}`,
		},
		{
			name: "a '#' dropped, after a call",
			steps: []trace.Event{
				msg("s", "user", "Hi, my member id is ola_nordmann_8812, I want to extend a loan."),
				call("s", "lookup_member", `{"member_id":"ola_nordmann_8812"}`),
				msg("s", "assistant", "Which loan?"),
				msg("s", "user", "The loan number is #L445566, thanks."),
			},
			want: `get_loan{"loan_id":"L445566"}`,
		},
		{
			name: "a constant argument beside a value",
			steps: []trace.Event{
				msg("s", "user", "My member id is ola_nordmann_8812. I would like to renew."),
				call("s", "lookup_member", `{"member_id":"ola_nordmann_8812"}`),
				msg("s", "user", "The loan number is #L445566."),
				call("s", "get_loan", `{"loan_id":"L445566"}`),
				msg("s", "user", "Yes please, go ahead."),
			},
			want: `renew_loan{"loan_id":"L445566","weeks":2}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := New(m, nil)
			var got []predict.Prediction
			for _, ev := range tt.steps {
				if ev.IsMessage() {
					got = p.Hear(ev)
				} else {
					got = p.Observe(ev)
				}
			}
			var keys []string
			for i, g := range got {
				if g.Origin != predict.OriginMessage || g.P < 0 || g.P > 1 {
					t.Errorf("prediction %d = %+v: want origin message and P in [0, 1]", i, g)
				}
				if i < 3 {
					keys = append(keys, g.Tool+string(g.Args))
				}
			}
			found := false
			for _, k := range keys {
				found = found || k == tt.want
			}
			if !found {
				t.Errorf("top 3 = %v, want %s among them", keys, tt.want)
			}
		})
	}
}

// TestCanary: an id that recurs in more than 5 sessions, each time as the
// first call's argument, and names said by users, appear nowhere in the
// serialised model (ISSUE-NOTES, privacy).
func TestCanary(t *testing.T) {
	sessions := readTestdata(t)
	canary, n := "zq_canary_4242", 0
	for _, s := range sessions {
		var a struct {
			MemberID string `json:"member_id"`
		}
		if json.Unmarshal(s.Events[0].Args, &a) == nil && a.MemberID == canary {
			n++
		}
	}
	if n <= 5 {
		t.Fatalf("testdata has the canary in %d sessions' first calls, want more than 5", n)
	}
	b, err := json.Marshal(mineTestdata(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{canary, "4242", "Zq", "Alice", "L1", "L2", "L3", "L4", "L5", "L6", "L7", "L8", "L9"} {
		if bytes.Contains(b, []byte(secret)) {
			t.Errorf("model holds %q", secret)
		}
	}
	// Issue 23: the whole pool file, patterns and all, as ahead mine
	// writes it.
	pool, err := mine.Mine(sessions, nil)
	if err != nil {
		t.Fatal(err)
	}
	pool.Conversation = b // as learn.MineInto puts it there
	var file bytes.Buffer
	if err := pool.Encode(&file); err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{canary, "4242", "Zq", "Alice", "L1", "L2", "L3", "L4", "L5", "L6", "L7", "L8", "L9"} {
		if bytes.Contains(file.Bytes(), []byte(secret)) {
			t.Errorf("pool file holds %q", secret)
		}
	}
	// No string in the model has a digit, '@', '#' or a capital, except
	// the names of tools and arguments (from the tool side, not said).
	var m Model
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for w := range m.Words {
		if !isWord(w) {
			t.Errorf("vocabulary holds %q", w)
		}
	}
	for _, tm := range m.Tools {
		for _, a := range tm.Args {
			for _, c := range a.Consts {
				if s := string(c.Value); regexp.MustCompile(`[0-9@#A-Z]`).MatchString(strings.Trim(s, `"`)) && s[0] == '"' {
					t.Errorf("%s.%s keeps the constant %s", tm.Name, a.Name, s)
				}
			}
		}
	}
}

func TestPrivate(t *testing.T) {
	for s, want := range map[string]bool{
		"economy": false, "one_way": false, "python": false,
		"W123": true, "a@b.c": true, "#x": true, "Alice": true, "Émile": true, "x1": true,
	} {
		if got := private(s); got != want {
			t.Errorf("private(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestJSONRoundTrip(t *testing.T) {
	m := mineTestdata(t)
	b1, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var m2 Model
	if err := json.Unmarshal(b1, &m2); err != nil {
		t.Fatal(err)
	}
	b2, err := json.Marshal(&m2)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b1, b2) {
		t.Errorf("round trip changed the model:\n%s\n%s", b1, b2)
	}
	ev := msg("s", "user", "My member id is ola_nordmann_8812, I want to renew a loan.")
	p1, p2 := New(m, nil).Hear(ev), New(&m2, nil).Hear(ev)
	if fmt.Sprint(p1) != fmt.Sprint(p2) {
		t.Errorf("predictions differ after a round trip:\n%v\n%v", p1, p2)
	}
	old := bytes.Replace(b1, []byte(`"version":1`), []byte(`"version":0`), 1)
	if err := json.Unmarshal(old, &m2); !errors.Is(err, ErrVersion) {
		t.Errorf("a model of another version: err = %v, want ErrVersion", err)
	}
}

// TestDeterministic mines the same sessions several times and wants the
// same bytes each time. The sessions' calls take several arguments, so
// that anything read in map order (arguments, contexts) would show: Go
// randomises map iteration per range statement.
func TestDeterministic(t *testing.T) {
	sessions := append(readTestdata(t), multiArgSessions(30)...)
	first, err := json.Marshal(mustMine(t, sessions))
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		b, err := json.Marshal(mustMine(t, sessions))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first, b) {
			t.Fatalf("mining twice gave different models (%d and %d bytes)", len(first), len(b))
		}
	}
}

func mustMine(t testing.TB, sessions []trace.Session) *Model {
	t.Helper()
	m, err := Mine(sessions, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// multiArgSessions returns n sessions where the user names a city, a date
// and a code that the calls then take, several arguments at once.
func multiArgSessions(n int) []trace.Session {
	cities := []string{"lisbon", "oslo", "quito", "dakar", "hanoi", "perth"}
	var out []trace.Session
	for i := range n {
		id := fmt.Sprintf("multi/%02d", i)
		from, to := cities[i%len(cities)], cities[(i*5+1)%len(cities)]
		date := fmt.Sprintf("2026-%02d-%02d", 1+i%12, 1+i*7%28)
		code := fmt.Sprintf("QX%04d", 1000+i*37)
		s := trace.Session{ID: id}
		add := func(ev trace.Event) {
			// A message's Seq is the number of calls before it.
			ev.Seq = len(s.Events)
			if ev.IsMessage() {
				s.Messages = append(s.Messages, ev)
			} else {
				ev.Step = ev.Seq + 1
				s.Events = append(s.Events, ev)
			}
		}
		add(msg(id, trace.RoleUser, fmt.Sprintf("please find a trip from %s to %s on %s, my booking code is %s", from, to, date, code)))
		add(call(id, "search_trips", fmt.Sprintf(`{"origin":%q,"destination":%q,"date":%q,"cabin":"economy"}`, from, to, date)))
		add(msg(id, trace.RoleUser, "and change the booking "+code+" to the first one please"))
		add(call(id, "change_booking", fmt.Sprintf(`{"code":%q,"origin":%q,"destination":%q,"date":%q,"pay":"card"}`, code, from, to, date)))
		out = append(out, s)
	}
	return out
}

// TestWindow: the window keeps the system prompt and the latest user
// message, drops the middle, and stays within its bound.
func TestWindow(t *testing.T) {
	m := mineTestdata(t)
	c := compile(m)
	st := newState(c, 1000, false)
	st.hear(msg("s", "system", "the system prompt"))
	st.hear(msg("s", "user", "my member id is ola_nordmann_8812"))
	for i := 0; i < 100; i++ {
		st.hear(msg("s", "assistant", strings.Repeat("words and more words ", 5)))
	}
	if st.bytes > 1000 {
		t.Errorf("window holds %d bytes, bound 1000", st.bytes)
	}
	if st.segs[0].role != roleSystem {
		t.Error("the system prompt was dropped")
	}
	if !containsSeg(st.segs, st.userSeg) {
		t.Error("the latest user message was dropped")
	}
	var sc scratch
	found := false
	for _, p := range st.predict(&sc, 10, false) {
		found = found || strings.Contains(string(p.Args), "ola_nordmann_8812")
	}
	if !found {
		t.Error("the value in the latest user message is no longer predicted")
	}
}

func containsSeg(segs []*segment, s *segment) bool {
	for _, x := range segs {
		if x == s {
			return true
		}
	}
	return false
}

func TestConcurrent(t *testing.T) {
	p := New(mineTestdata(t), &Options{MaxSessions: 8})
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Go(func() {
			for i := 0; i < 50; i++ {
				s := fmt.Sprintf("s%d", (g+i)%12)
				p.Start(s)
				p.Hear(msg(s, "user", "my member id is ola_nordmann_8812, renew please"))
				p.Observe(call(s, "lookup_member", `{"member_id":"ola_nordmann_8812"}`))
				if i%7 == 0 {
					p.Forget(s)
				}
			}
		})
	}
	wg.Wait()
	p.mu.Lock()
	n := len(p.sessions)
	p.mu.Unlock()
	if n > 8 {
		t.Errorf("%d sessions tracked, bound 8", n)
	}
}

func FuzzHear(f *testing.F) {
	m, err := Mine(readTestdata(f), nil)
	if err != nil {
		f.Fatal(err)
	}
	p := New(m, &Options{MaxBytes: 4096})
	f.Add("My member id is ola_nordmann_8812.", "user")
	f.Add("#L123 #L # ## \x00\xff é É 1e999 -0", "assistant")
	f.Add(strings.Repeat("a_b_1 ", 2000), "system")
	f.Fuzz(func(t *testing.T, content, role string) {
		preds := p.Hear(msg("f", role, content))
		preds = append(preds, p.Observe(call("f", "lookup_member", `{"member_id":`+fmt.Sprintf("%q", content)+`}`))...)
		for _, pr := range preds {
			if !json.Valid(pr.Args) || pr.P < 0 || pr.P > 1 {
				t.Fatalf("bad prediction %+v", pr)
			}
		}
	})
}

// TestDistinctValues: a tool whose calls never put one value in two
// arguments is not predicted with one, where the same token would
// otherwise fit both (two cities, one shape).
func TestDistinctValues(t *testing.T) {
	m := mustMine(t, multiArgSessions(30))
	for _, tm := range m.Tools {
		if tm.Name == "search_trips" && (tm.SameCalls != 0 || tm.DistinctCalls != 30) {
			t.Fatalf("search_trips: same %v, distinct %v calls; want 0 and 30", tm.SameCalls, tm.DistinctCalls)
		}
	}
	p := New(m, nil)
	p.Hear(msg("d", trace.RoleUser, "please find a trip from hanoi to perth on 2026-03-04"))
	preds := p.Hear(msg("d", trace.RoleUser, "from hanoi, to perth, thanks"))
	n := 0
	for _, pr := range preds {
		if pr.Tool != "search_trips" {
			continue
		}
		n++
		var a map[string]string
		if err := json.Unmarshal(pr.Args, &a); err != nil {
			t.Fatal(err)
		}
		if a["origin"] == a["destination"] {
			t.Errorf("predicted %s with one value in two arguments (P %.3f)", pr.Args, pr.P)
		}
	}
	if n == 0 {
		t.Fatalf("no search_trips predicted: %v", preds)
	}
}

// TestComingKeys: a prediction made before a call may serve that call
// and the later calls of its step, not the calls of the step already
// made (calibration counts it a hit only then).
func TestComingKeys(t *testing.T) {
	s := trace.Session{ID: "c", Events: []trace.Event{
		{Seq: 0, Step: 1, Tool: "a", Args: json.RawMessage(`{"x":1}`)},
		{Seq: 1, Step: 1, Tool: "b", Args: json.RawMessage(`{"x":2}`)},
		{Seq: 2, Step: 1, Tool: "c", Args: json.RawMessage(`{"x":3}`)},
		{Seq: 3, Step: 2, Tool: "d", Args: json.RawMessage(`{"x":4}`)},
	}}
	for _, tc := range []struct {
		seq  int
		want []string
	}{
		{0, []string{"a", "b", "c"}},
		{1, []string{"b", "c"}},
		{2, []string{"c"}},
		{3, []string{"d"}},
	} {
		var got []string
		for _, k := range comingKeys(s, s.Events[tc.seq], nil) {
			tool, _, _ := strings.Cut(k, "\x00")
			got = append(got, tool)
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("before call %d: %v, want %v", tc.seq, got, tc.want)
		}
	}
}

// TestLambdaChosen: Mine weighs the user's words by how well they told
// the tools apart on the half of the sessions a model was not fitted on:
// heavily when the words name the tool, lightly when they are noise; an
// explicit weight is kept.
func TestLambdaChosen(t *testing.T) {
	sessions := func(informative bool) []trace.Session {
		var out []trace.Session
		for i := range 60 {
			id := fmt.Sprintf("w/%02d", i)
			tool, word := "renew_loan", "renew"
			if i%2 == 1 {
				tool, word = "return_book", "return"
			}
			if !informative && i%3 == 0 {
				word = map[string]string{"renew": "return", "return": "renew"}[word]
			}
			out = append(out, trace.Session{ID: id,
				Messages: []trace.Event{msg(id, trace.RoleUser, "hello, please "+word+" the book for me, item "+fmt.Sprint(1000+i))},
				Events:   []trace.Event{{Session: id, Seq: 0, Step: 1, Tool: tool, Args: json.RawMessage(fmt.Sprintf(`{"item":"%d"}`, 1000+i)), Status: trace.StatusOK}},
			})
		}
		return out
	}
	named, noisy := mustMine(t, sessions(true)).Lambda, mustMine(t, sessions(false)).Lambda
	t.Logf("lambda: %v where the words name the tool, %v where they are noise", named, noisy)
	if named <= noisy {
		t.Errorf("lambda %v where the words name the tool, %v where they are noise; want the first larger", named, noisy)
	}
	m, err := Mine(sessions(true), &MineOptions{Lambda: 0.3})
	if err != nil {
		t.Fatal(err)
	}
	if m.Lambda != 0.3 {
		t.Errorf("explicit lambda 0.3 became %v", m.Lambda)
	}
}
