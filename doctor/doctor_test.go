package doctor

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ahead-dev/ahead/config"
	"github.com/ahead-dev/ahead/policy"
)

func TestCheck(t *testing.T) {
	up := httptest.NewServer(http.NotFoundHandler())
	defer up.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	ln.Close() // nothing listens there now

	dir := t.TempDir()
	file := filepath.Join(dir, "ahead.yaml")
	yaml := fmt.Sprintf(`patterns: ./pool.json
backends:
  web:
    http: {url: "%s/tools/{tool}"}
    tools: [search, fetch]
  gone:
    http: {url: "http://%s/{tool}"}
    tools: [delete]
  local:
    exec: {command: [no-such-command-ahead]}
    tools: [run]
speculation_policy:
  tools:
    search: {allow: true}
    fetsh: {allow: true}
    "get_*": {allow: true}
`, up.URL, down)
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	rep := Check(t.Context(), cfg, nil)
	if !rep.Failed() {
		t.Error("Failed() = false with an unreachable backend and a missing command")
	}
	var b bytes.Buffer
	if err := rep.Write(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"ok    backend web      " + strings.TrimPrefix(up.URL, "http://") + " accepts connections",
		"FAIL  backend gone     unreachable: ",
		"FAIL  backend local    command: ",
		"warn  policy           tools.fetsh: no backend lists this tool",
		`warn  policy           tools."get_*": matches no tool the backends list`,
		"ok    patterns         " + filepath.Join(dir, "pool.json") + " does not exist yet",
		"  search  web      full",
		"  fetch   web      never",
		"some checks failed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if got := rep.Tools[len(rep.Tools)-1]; got.Tool != "search" || got.Level != policy.LevelFull {
		t.Errorf("last tool %+v, want search at full", got)
	}
}

// TestCheckReadsEveryBlock is issue 27's doctor: it checks the llm and
// speculator blocks, the folder a learning pool is saved to, and does not
// warn that nothing is predicted when the model's stream predicts.
func TestCheckReadsEveryBlock(t *testing.T) {
	up := httptest.NewServer(http.NotFoundHandler())
	defer up.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "afile"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	check := func(yaml string) map[string][]Finding {
		t.Helper()
		file := filepath.Join(dir, "ahead.yaml")
		if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Load(file)
		if err != nil {
			t.Fatal(err)
		}
		by := map[string][]Finding{}
		for _, f := range Check(t.Context(), cfg, nil).Findings {
			by[f.Subject] = append(by[f.Subject], f)
		}
		return by
	}
	has := func(fs []Finding, sev Severity, text string) bool {
		for _, f := range fs {
			if f.Severity == sev && strings.Contains(f.Message, text) {
				return true
			}
		}
		return false
	}
	t.Setenv("AHEAD_TEST_UNSET_KEY", "")
	by := check(fmt.Sprintf(`llm: {anthropic: {base_url: %q}}
speculator: {base_url: "http://%s/v1", model: m, api_key_env: AHEAD_TEST_UNSET_KEY}
backends: {web: {http: {url: "%s/{tool}"}, tools: [search]}}
patterns: none
`, up.URL, down, up.URL))
	if !has(by["llm anthropic"], OK, "accepts connections") || len(by["llm openai"]) != 0 {
		t.Errorf("llm findings %+v %+v, want anthropic ok and nothing of openai", by["llm anthropic"], by["llm openai"])
	}
	if !has(by["speculator"], Fail, "AHEAD_TEST_UNSET_KEY is not set") || !has(by["speculator"], Fail, "unreachable") {
		t.Errorf("speculator findings %+v, want the unset key and the unreachable host", by["speculator"])
	}
	if has(by["patterns"], Warn, "nothing is predicted") || !has(by["patterns"], OK, "model's stream") {
		t.Errorf("patterns findings %+v: with an llm block, the stream predicts", by["patterns"])
	}

	// Issue 24: without a patterns block the built-in default predicts.
	by = check(`backends: {web: {http: {url: "http://127.0.0.1:1/{tool}"}, tools: [search]}}
`)
	if !has(by["patterns"], OK, "the built-in default predicts, learning in memory") || len(by["patterns"]) != 1 {
		t.Errorf("patterns findings %+v, want the built-in default learning in memory", by["patterns"])
	}
	by = check(`patterns: ./some/new/dir/pool.json
backends: {web: {http: {url: "` + up.URL + `/{tool}"}, tools: [search]}}
`)
	if !has(by["patterns"], OK, "ahead makes it at start") {
		t.Errorf("patterns findings %+v, want the new folder noted", by["patterns"])
	}
	by = check(`patterns: ./afile/pool.json
backends: {web: {http: {url: "` + up.URL + `/{tool}"}, tools: [search]}}
`)
	if !has(by["patterns"], Fail, "not a folder") {
		t.Errorf("patterns findings %+v, want a failure: the folder's parent is a file", by["patterns"])
	}
}
