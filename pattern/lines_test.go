package pattern

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ahead-dev/ahead/callkey"
	"github.com/ahead-dev/ahead/internal/rawjson"
	"github.com/ahead-dev/ahead/trace"
)

// TestLinesList pins what a list of lines gives, read whole (a text
// output) and as a JSON string, plain and in a template: a line is a
// string, canonical JSON as callkey writes it; a text line that is not
// UTF-8 is what callkey makes of it quoted, and no template reads it.
func TestLinesList(t *testing.T) {
	lines := []string{"a.txt", `b "q".md`, `c\d`, "tab\there", "é中😀", "bad \xff\xfe", "x"}
	text := "  " + strings.Join(lines, "\n\n ") + "\n"
	events := map[string]trace.Event{
		"text":   {Session: "s", Tool: "ls", Args: json.RawMessage(`{}`), Status: trace.StatusOK, Output: text},
		"string": {Session: "s", Tool: "ls", Args: json.RawMessage(`{}`), Status: trace.StatusOK, Output: `{"out":` + string(rawjson.AppendQuoted(nil, strings.ToValidUTF8(text, "?"))) + `}`},
	}
	for name, ev := range events {
		for _, prefix := range []string{"", "dir/"} {
			t.Run(name+"/"+prefix, func(t *testing.T) {
				c := NewCompiler(nil)
				path := ""
				if name == "string" {
					path = "/out"
				}
				pt := Pattern{Context: []Signature{c.Signature(c.Sign("ls", trace.StatusOK, nil))}, Tool: "read", Exact: true,
					List: &ListSource{Part: PartOutput, Path: path, Lines: true},
					Args: []Mapping{{Arg: "path", Part: PartItem, Prefix: prefix}}, Hits: make([]int, 8)}
				cp, err := c.Compile(&pt)
				if err != nil {
					t.Fatal(err)
				}
				h := newTestHistory(c.x, ev)
				cands, _ := cp.Eval([]int{0}, h, 8, nil, nil)
				var got []string
				for _, cd := range cands {
					got = append(got, string(cd.Args))
				}
				var want []string
				for _, l := range lines {
					if name == "string" {
						l = strings.ToValidUTF8(l, "?")
					}
					var v []byte
					switch {
					case prefix != "" && !utf8.ValidString(l):
						continue
					case prefix != "":
						v = rawjson.AppendQuoted(nil, prefix+l)
					default:
						if v, err = callkey.CanonicalValueView(rawjson.AppendQuoted(nil, l)); err != nil {
							continue
						}
					}
					want = append(want, `{"path":`+string(v)+`}`)
				}
				if strings.Join(got, " ") != strings.Join(want, " ") {
					t.Errorf("candidates\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
			})
		}
	}
}
