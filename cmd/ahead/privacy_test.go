package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ahead-dev/ahead/trace"
)

// sharedConv is the shared tau2 trace with the customers' words.
const sharedConv = "/work/shared/traces/tau2-airline-retail-train-conv.jsonl.gz"

// saidID matches what looks like an id in a user's words: a run of
// letters, digits, '_', '#', '@', '.' or '-' holding a digit or an '@'
// ("#W4689314", "sofia_li_9219", "credit_card_4190576", "x@y.com").
var saidID = regexp.MustCompile(`[#\w@.\-]*[\d@][#\w@.\-]*`)

// Issue 23: mining the shared tau2 -conv file with default flags writes
// none of the ids its users said anywhere in the pool file (patterns,
// discriminators, conversation model); with --keep-values it may, and
// says so in the pool.
func TestMinedPoolKeepsNoUserIDs(t *testing.T) {
	if _, err := os.Stat(sharedConv); err != nil {
		t.Skipf("shared traces not here: %v", err)
	}
	// Ids of at least 5 characters that users said, in at least two
	// sessions (a value said once can never become a pattern's constant).
	said := make(map[string]map[string]bool)
	for ev, err := range trace.NewReader(nil).Events(sharedConv) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Role != trace.RoleUser {
			continue
		}
		for _, id := range saidID.FindAllString(ev.Content, -1) {
			id = strings.Trim(id, ".-")
			if len(id) < 5 || !strings.ContainsAny(id, "0123456789@") {
				continue
			}
			if said[id] == nil {
				said[id] = make(map[string]bool)
			}
			said[id][ev.Session] = true
		}
	}
	var ids []string
	for id, ss := range said {
		if len(ss) >= 2 {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	if len(ids) < 20 {
		t.Fatalf("only %d ids said in two sessions or more: the check would prove little", len(ids))
	}

	// The held-out part (132 sessions) keeps the test to seconds; the
	// code before issue 23 wrote 233 constants of such values from it.
	out := filepath.Join(t.TempDir(), "pool.json")
	meta := strings.TrimSuffix(sharedConv, ".jsonl.gz") + ".sessions.jsonl"
	if code, _, stderr := runCLI(t, "mine", "--sessions", meta, "--split-by", "task_id", "--part", "test", "-o", out, sharedConv); code != 0 {
		t.Fatalf("ahead mine: exit %d: %s", code, stderr)
	}
	pool, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	// The whole file, cut into tokens as the users' words were (so that
	// the digits of a probability are not an id): an id, or the id
	// without its '#', must not be one of them.
	inPool := make(map[string]bool)
	for _, tok := range saidID.FindAllString(string(pool), -1) {
		inPool[strings.Trim(tok, ".-")] = true
	}
	var found []string
	for _, id := range ids {
		if inPool[id] || inPool[strings.TrimPrefix(id, "#")] {
			found = append(found, id)
		}
	}
	if len(found) > 0 {
		t.Errorf("%d of %d ids users said are in the pool file: %q", len(found), len(ids), found[:min(10, len(found))])
	}
	if bytes.Contains(pool, []byte(`"keep_values"`)) {
		t.Errorf("a pool mined with default flags says keep_values")
	}
}
