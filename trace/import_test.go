package trace

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// importers maps each transcript format to its importer.
var importers = map[string]func(string, []byte, *ImportOptions, *ImportStats) ([]Event, error){
	"openai":    ImportOpenAI,
	"anthropic": ImportAnthropic,
}

// TestImportGolden imports each hand-written transcript of
// testdata/import and compares the trace (calls and messages) with its
// .golden file; -update rewrites them.
func TestImportGolden(t *testing.T) {
	for _, tt := range []struct {
		in, format string
		stats      ImportStats
	}{
		{"openai-chat.jsonl", "openai", ImportStats{Sessions: 2, Calls: 5, Messages: 10, Unanswered: 1}},
		{"responses.json", "openai", ImportStats{Sessions: 1, Calls: 3, Messages: 5, Unanswered: 1}},
		{"anthropic.jsonl", "anthropic", ImportStats{Sessions: 2, Calls: 5, Messages: 9, Unanswered: 1}},
	} {
		t.Run(tt.in, func(t *testing.T) {
			in := filepath.Join("testdata", "import", tt.in)
			data, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			var stats ImportStats
			evs, err := importers[tt.format](tt.in, data, nil, &stats)
			if err != nil {
				t.Fatal(err)
			}
			if stats != tt.stats {
				t.Errorf("stats = %+v, want %+v", stats, tt.stats)
			}
			var got bytes.Buffer
			for _, ev := range evs {
				if err := EncodeLine(&got, ev); err != nil {
					t.Fatal(err)
				}
			}
			golden := strings.TrimSuffix(in, filepath.Ext(in)) + ".golden.jsonl"
			if *update {
				if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(want), got.String()); diff != "" {
				t.Errorf("%s (-want +got):\n%s", golden, diff)
			}
			checkImported(t, evs)
		})
	}
}

// checkImported checks what every import must give: valid events that
// read back unchanged, messages numbered as the trace format says, and
// every event yielded by Known.
func checkImported(t *testing.T, evs []Event) {
	t.Helper()
	seqs := make(map[string]int) // calls so far per session
	for _, ev := range evs {
		switch {
		case ev.IsCall():
			if ev.Tool == "" || ev.Session == "" || (ev.Status != StatusOK && ev.Status != StatusError) {
				t.Fatalf("invalid call: %+v", ev)
			}
			if ev.Seq != seqs[ev.Session] {
				t.Fatalf("call seq %d, want %d: %+v", ev.Seq, seqs[ev.Session], ev)
			}
			seqs[ev.Session]++
		case ev.IsMessage():
			if ev.Content == "" || (ev.Role != RoleSystem && ev.Role != RoleUser && ev.Role != RoleAssistant) {
				t.Fatalf("invalid message: %+v", ev)
			}
			if ev.Seq != seqs[ev.Session] || (ev.Step != 0 && ev.Role != RoleAssistant) {
				t.Fatalf("message seq %d step %d, want seq %d: %+v", ev.Seq, ev.Step, seqs[ev.Session], ev)
			}
		default:
			t.Fatalf("event of kind %q", ev.Kind)
		}
	}
	again := roundTrip(t, evs)
	if diff := cmp.Diff(evs, again, cmp.Comparer(func(a, b []byte) bool { return bytes.Equal(a, b) })); diff != "" {
		t.Fatalf("read back (-imported +read):\n%s", diff)
	}
	sessions, err := Collect(stream(again))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range sessions {
		for range Known(s) {
			n++
		}
	}
	if n != len(evs) {
		t.Fatalf("Known yields %d events of %d", n, len(evs))
	}
}

// FuzzImportAnthropic checks that no input crashes the importer and that
// what it produces is a valid trace.
func FuzzImportAnthropic(f *testing.F) {
	if data, err := os.ReadFile(filepath.Join("testdata", "import", "anthropic.jsonl")); err == nil {
		f.Add(data)
	}
	f.Add([]byte(`{"system":"s","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"text","text":"t"},{"type":"tool_use","id":"1","name":"a","input":{"x":1}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"1","content":[{"type":"text","text":"r"}],"is_error":true}]}]}`))
	f.Add([]byte(`{"role":"assistant","content":[{"type":"tool_use","id":"1","name":"a","input":"{}"}]}` + "\n" + `{"role":"user","content":[{"type":"tool_result","tool_use_id":"1","content":"x"},{"type":"text","text":"more"}]}`))
	f.Add([]byte(`[{"role":"user","content":[{"type":"tool_result"}]},{"role":"assistant","content":null}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		evs, err := ImportAnthropic("fuzz", data, &ImportOptions{SkipBad: true}, nil)
		if err != nil {
			return
		}
		checkImported(t, evs)
	})
}
