package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ahead-dev/ahead/evaluate"
	"github.com/ahead-dev/ahead/learn"
	"github.com/ahead-dev/ahead/pattern"
)

// runCLI runs the command line and returns its exit code and outputs.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	e := &env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr}
	code := run(t.Context(), e, args)
	return code, stdout.String(), stderr.String()
}

// writeListTrace writes a trace where each session lists items and reads
// them in order, and its sessions file with a task id per session (two
// sessions per task).
func writeListTrace(t *testing.T, dir string, sessions int) (tracePath, metaPath string) {
	t.Helper()
	var tr, meta strings.Builder
	for i := range sessions {
		id := fmt.Sprintf("s%02d", i)
		fmt.Fprintf(&meta, `{"session":%q,"task_id":"proj%d-%d","model":"m"}`+"\n", id, i/2, i)
		items := fmt.Sprintf(`{\"items\": [{\"name\": \"a%d\"}, {\"name\": \"b%d\"}, {\"name\": \"c%d\"}]}`, i, i, i)
		fmt.Fprintf(&tr, `{"session":%q,"seq":0,"step":1,"tool":"list_items","args":{"folder":"f%d"},"status":"ok","output":"%s"}`+"\n", id, i, items)
		for j, c := range []string{"a", "b", "c"} {
			fmt.Fprintf(&tr, `{"session":%q,"seq":%d,"step":%d,"tool":"read_item","args":{"name":"%s%d"},"status":"ok","output":"text"}`+"\n", id, j+1, j+2, c, i)
		}
	}
	tracePath = filepath.Join(dir, "t.jsonl")
	metaPath = filepath.Join(dir, "t.sessions.jsonl")
	if err := os.WriteFile(tracePath, []byte(tr.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(metaPath, []byte(meta.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return tracePath, metaPath
}

func TestMineAndEval(t *testing.T) {
	dir := t.TempDir()
	tr, meta := writeListTrace(t, dir, 40)
	pool := filepath.Join(dir, "pool.json")
	split := []string{"--sessions", meta, "--split-by", "task_id", "--split-match", `^(.*)-[0-9]+$`, "--holdout", "0.3"}

	code, out, errOut := runCLI(t, append(append([]string{"mine"}, split...), "--part", "train", "--min-support", "2", "-o", pool, tr)...)
	if code != 0 {
		t.Fatalf("mine: exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "patterns kept") || !strings.Contains(out, "→ "+pool) {
		t.Errorf("mine summary: %q", out)
	}
	// Off a terminal, progress is plain lines on stderr (no bar).
	if !strings.HasPrefix(errOut, "ahead mine: contexts ") || strings.Contains(errOut, "\r") {
		t.Errorf("mine's progress off a terminal: %q", errOut)
	}
	p, err := pattern.Load(pool)
	if err != nil {
		t.Fatal(err)
	}
	trainSessions := p.Mined.Sessions
	if trainSessions == 0 || trainSessions >= 40 {
		t.Fatalf("mined %d sessions of 40 with a 0.3 holdout", trainSessions)
	}

	preds := filepath.Join(dir, "preds.jsonl")
	code, out, errOut = runCLI(t, append(append([]string{"eval"}, split...), "--part", "test", "--patterns", pool, "--predictions", preds, "--json", tr)...)
	if code != 0 {
		t.Fatalf("eval: exit %d: %s", code, errOut)
	}
	var res struct {
		Sessions, Calls  int
		First            int  `json:"first_calls"`
		BaselineInSample bool `json:"baseline_in_sample"`
		Ahead, NGram     evaluate.Metrics
		Tools            []struct{ Tool string }
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("eval --json output: %v\n%s", err, out)
	}
	if res.Sessions != 40-trainSessions || res.Calls != 4*res.Sessions || res.First != res.Sessions || res.BaselineInSample {
		t.Errorf("eval counts: %+v", res)
	}
	// Every read_item is predictable exactly from the list: 3 of 4 calls.
	// The first call, list_items, is predicted from the session start, tool
	// only (its folder varies).
	if res.Ahead.ExactAt1 != 0.75 || res.Ahead.ToolAt1 != 1 {
		t.Errorf("ahead metrics %+v, want exact_at_1 = 0.75, tool_at_1 = 1", res.Ahead)
	}
	if res.NGram.ExactAt1 >= res.Ahead.ExactAt1 {
		t.Errorf("the n-gram baseline (%+v) is as good as ahead", res.NGram)
	}
	f, err := os.Open(preds)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lines := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var line struct {
			Session     *string
			Seq         *int
			Predictions []struct {
				Tool string
				Args json.RawMessage
				P    float64
			}
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil || line.Session == nil || line.Seq == nil || line.Predictions == nil {
			t.Fatalf("predictions line %q: %v", sc.Text(), err)
		}
		if len(line.Predictions) > 10 {
			t.Errorf("%d predictions, want at most 10", len(line.Predictions))
		}
		if *line.Seq == 0 && (len(line.Predictions) == 0 || line.Predictions[0].Tool != "list_items" || line.Predictions[0].Args != nil) {
			t.Errorf("first call's predictions %+v, want list_items tool-only first", line.Predictions)
		}
		lines++
	}
	if lines != res.Calls {
		t.Errorf("%d prediction lines, want one per call (%d)", lines, res.Calls)
	}

	code, out, _ = runCLI(t, "eval", "--patterns", pool, tr)
	if code != 0 || !strings.Contains(out, "exact_at_3") || !strings.Contains(out, "n-gram*") || !strings.Contains(out, "read_item") {
		t.Errorf("eval text output (exit %d):\n%s", code, out)
	}

	pol := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(pol, []byte("speculation_policy:\n  tools: {read_item: {allow: true}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ = runCLI(t, "eval", "--patterns", pool, "--policy", pol, tr)
	// All 40 sessions: three read_item calls each.
	if want := "ahead on the 120 calls the policy may run"; code != 0 || !strings.Contains(out, want) {
		t.Errorf("eval --policy (exit %d), want %q:\n%s", code, want, out)
	}

	code, out, _ = runCLI(t, "patterns", "show", "--top", "3", pool)
	if code != 0 || !strings.Contains(out, "read_item(name = each(") || strings.Count(out, "→") < 3 {
		t.Errorf("patterns show (exit %d):\n%s", code, out)
	}
}

// TestEvalRelearn: from a pool that knows none of the tools (an empty one),
// eval --relearn-every mines what it has seen every few sessions, as a
// running ahead does at its checkpoints, and predicts the rest; frozen, or
// learning counts alone, it predicts nothing.
func TestEvalRelearn(t *testing.T) {
	dir := t.TempDir()
	tr, _ := writeListTrace(t, dir, 40)
	pool := filepath.Join(dir, "empty.json")
	if err := learn.EmptyPool().Save(pool); err != nil {
		t.Fatal(err)
	}
	exact := func(args ...string) float64 {
		t.Helper()
		code, out, errOut := runCLI(t, append(append([]string{"eval", "--json", "--patterns", pool}, args...), tr)...)
		if code != 0 {
			t.Fatalf("eval %v: exit %d: %s", args, code, errOut)
		}
		var res struct{ Ahead evaluate.Metrics }
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatal(err)
		}
		return res.Ahead.ExactAt1
	}
	if got := exact(); got != 0 {
		t.Errorf("frozen empty pool: exact_at_1 %.3f, want 0", got)
	}
	if got := exact("--learn"); got != 0 {
		t.Errorf("--learn alone: exact_at_1 %.3f, want 0 (counts of no pattern)", got)
	}
	// Relearnt after 5 sessions, the three reads of each of the other 35
	// are predicted from the list: 105 of 160 calls.
	if got := exact("--relearn-every", "5"); got != 105.0/160 {
		t.Errorf("--relearn-every 5: exact_at_1 %.3f, want 105/160", got)
	}
}

func TestMineDeterministicFile(t *testing.T) {
	dir := t.TempDir()
	tr, _ := writeListTrace(t, dir, 10)
	var files [2][]byte
	for i := range files {
		pool := filepath.Join(dir, fmt.Sprint("p", i, ".json"))
		if code, _, errOut := runCLI(t, "mine", "-o", pool, tr); code != 0 {
			t.Fatalf("mine: %s", errOut)
		}
		files[i], _ = os.ReadFile(pool)
	}
	if !bytes.Equal(files[0], files[1]) {
		t.Error("mining the same trace twice wrote different pool files")
	}
}

func TestMineEvalErrors(t *testing.T) {
	dir := t.TempDir()
	tr, meta := writeListTrace(t, dir, 4)
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte(`{"session":"s","seq":0,"tool":"t","status":"ok"}`+"\n"+`{"session":"s","seq":1,"tool":"t","status":"maybe"}`+"\n"+`{"session":"s","seq":2,"tool":"t","status":"ok"}`+"\n"), 0o644)
	pool := filepath.Join(dir, "pool.json")
	badPolicy := filepath.Join(dir, "policy.yaml")
	os.WriteFile(badPolicy, []byte("speculation_policy:\n  tools: {read_item: {allow: maybe}}\n"), 0o644)
	tests := []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"mine", tr}, 2, "-o pool.json is required"},
		{[]string{"mine", "-o", pool}, 2, "no trace files"},
		{[]string{"mine", "-o", pool, "--max-context", "9", tr}, 2, "--max-context"},
		{[]string{"mine", "-o", pool, "--horizon", "0", tr}, 2, "--horizon"},
		{[]string{"mine", "-o", pool, "--max-candidates", "65", tr}, 2, "--max-candidates"},
		{[]string{"mine", "-o", pool, "--part", "dev", tr}, 2, "--part"},
		{[]string{"mine", "-o", pool, "--part", "test", "--split-by", "task_id", tr}, 2, "--sessions"},
		{[]string{"mine", "-o", pool, "--part", "test", "--sessions", meta, "--split-match", "(", tr}, 2, "--split-match"},
		{[]string{"mine", "-o", pool, filepath.Join(dir, "missing.jsonl")}, 1, "missing.jsonl"},
		{[]string{"mine", "-o", pool, bad}, 1, bad + ":2: field \"status\""},
		{[]string{"eval", "--default", filepath.Join(dir, "nodefault.json"), tr}, 1, "nodefault.json"},
		{[]string{"eval", "--default", badPolicy, tr}, 1, badPolicy + ": convo: reading the default"},
		{[]string{"eval", "--patterns", filepath.Join(dir, "nope.json"), tr}, 1, "nope.json"},
		{[]string{"eval", "--patterns", pool, "--policy", badPolicy, tr}, 1, badPolicy + ":2:"},
		{[]string{"eval", "--patterns", pool, "--relearn-every", "-1", tr}, 2, "--relearn-every"},
		{[]string{"patterns", "list", pool}, 2, "show"},
		{[]string{"patterns", "show"}, 2, "one pool file"},
	}
	for _, tt := range tests {
		code, _, errOut := runCLI(t, tt.args...)
		if code != tt.code || !strings.Contains(errOut, tt.msg) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d mentioning %q", tt.args, code, errOut, tt.code, tt.msg)
		}
	}
	// --skip-bad mines past the malformed line and says so.
	code, out, errOut := runCLI(t, "mine", "--skip-bad", "-o", pool, bad)
	if code != 0 || !strings.Contains(out, "skipped 1 malformed") {
		t.Errorf("mine --skip-bad: exit %d, %q %q", code, out, errOut)
	}
	if code, out, _ := runCLI(t, "mine", "--help"); code != 0 || !strings.Contains(out, "--split-by") {
		t.Errorf("mine --help: exit %d\n%s", code, out)
	}
}

func TestTracesImport(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "chat.json")
	os.WriteFile(in, []byte(`{"id":"c1","messages":[
 {"role":"user","content":"find order 7"},
 {"role":"assistant","tool_calls":[{"id":"x","type":"function","function":{"name":"get_order","arguments":"{\"id\": 7}"}}]},
 {"role":"tool","tool_call_id":"x","content":"{\"status\": \"shipped\"}"}]}`), 0o644)
	out := filepath.Join(dir, "out.jsonl.gz")
	ss := runImport(t, "openai", in, out, "1 session, 1 call")
	if len(ss) != 1 || ss[0].ID != "c1" || len(ss[0].Events) != 1 || ss[0].Events[0].Output != `{"status": "shipped"}` || string(ss[0].Events[0].Args) != `{"id":7}` {
		t.Errorf("imported: %+v", ss)
	}
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte(`{"role":"user","content":"x"}`+"\n"+`{"role":"assistant","tool_calls":[{"id":"1","function":{"name":"a","arguments":"oops"}}]}`+"\n"), 0o644)
	for _, tt := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"traces", "import", "--from", "openai", "-o", out, bad}, 1, bad + ":2:"},
		{[]string{"traces", "import", "--from", "langchain", "-o", out, in}, 2, "--from"},
		{[]string{"traces", "import", "--from", "openai", in}, 2, "-o"},
		{[]string{"traces", "convert"}, 2, "import"},
	} {
		code, _, errOut := runCLI(t, tt.args...)
		if code != tt.code || !strings.Contains(errOut, tt.msg) {
			t.Errorf("%v: exit %d, stderr %q; want %d mentioning %q", tt.args, code, errOut, tt.code, tt.msg)
		}
	}
	if _, err := os.Stat(out); err != nil {
		t.Errorf("a failed import replaced the earlier output: %v", err)
	}
	code, stdout, _ := runCLI(t, "traces", "import", "--from", "openai", "--skip-bad", "-o", "-", bad)
	if code != 0 || strings.Count(stdout, "\n") != 1 || !strings.Contains(stdout, `"role":"user"`) { // the user's message, not the bad call
		t.Errorf("--skip-bad to stdout: exit %d, %q", code, stdout)
	}
}
