package trace

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestWriteFile(t *testing.T) {
	events := []Event{
		{Session: "s", Seq: 0, Tool: "list", Args: json.RawMessage(`{"dir": "/"}`), Status: StatusOK, Output: "a\nb"},
		{Session: "s", Seq: 1, Tool: "read", Args: json.RawMessage(`{"path":"/a"}`), Status: StatusOK, Output: "x"},
	}
	for _, name := range []string{"t.jsonl", "t.jsonl.gz"} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), name)
			if err := os.WriteFile(file, []byte("old"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := WriteFile(file, events); err != nil {
				t.Fatal(err)
			}
			sessions, err := Collect(NewReader(nil).Events(file))
			if err != nil {
				t.Fatal(err)
			}
			want := []Session{{ID: "s", Events: events}}
			want[0].Events[0].Args = json.RawMessage(`{"dir":"/"}`) // compacted
			if diff := cmp.Diff(want, sessions); diff != "" {
				t.Errorf("read back (-want +got):\n%s", diff)
			}
			if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o644 {
				t.Errorf("file mode %v (%v), want 0644", fi.Mode(), err)
			}
		})
	}
}

// TestWriteFileFails: an event that cannot be encoded leaves the old file
// as it was, and no temporary file.
func TestWriteFileFails(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "t.jsonl")
	if err := os.WriteFile(file, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(file, []Event{{Session: "s", Tool: "x", Args: json.RawMessage(`{bad`)}}); err == nil {
		t.Fatal("WriteFile wrote invalid arguments")
	}
	if data, _ := os.ReadFile(file); string(data) != "old" {
		t.Errorf("file = %q, want the old contents", data)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only the old file", len(entries))
	}
}

func TestEncode(t *testing.T) {
	var b bytes.Buffer
	if err := Encode(&b, []Event{{Session: "s", Tool: "x", Args: json.RawMessage(`{}`), Status: StatusOK}}, false); err != nil {
		t.Fatal(err)
	}
	if got, want := b.String(), `{"session":"s","seq":0,"step":0,"tool":"x","args":{},"status":"ok","output":""}`+"\n"; got != want {
		t.Errorf("Encode wrote %s, want %s", got, want)
	}
}

func TestDirOf(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"t.jsonl", "."}, {"/t.jsonl", "/"}, {"a/b/t.jsonl", "a/b"}, {`a\t.jsonl`, "a"},
	} {
		if got := dirOf(tc.name); got != tc.want {
			t.Errorf("dirOf(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
}
