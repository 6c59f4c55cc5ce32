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
