package pattern

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestIdentifying(t *testing.T) {
	for s, want := range map[string]bool{
		"economy": false, "": false, "open ticket": false, "/README.md": false, "JFK": false,
		"#W4689314": true, "sofia_li_9219": true, "a@b.c": true, "Daiki": true, "iPhone": true, "Émile": true, "2024-05-28": true,
	} {
		if got := Identifying(s); got != want {
			t.Errorf("Identifying(%q) = %v, want %v", s, got, want)
		}
	}
	for v, want := range map[string]bool{
		`"economy"`: false, `42`: false, `true`: false, `["a",{"b":null}]`: false,
		`["a","Bo"]`: true, `{"Key":1}`: true, `{"k":{"x":"#1"}}`: true, `not json`: true,
	} {
		if got := IdentifyingJSON(json.RawMessage(v)); got != want {
			t.Errorf("IdentifyingJSON(%s) = %v, want %v", v, got, want)
		}
	}
}

// Issue 23: whatever made a pool (a miner, online learning, a merge), the
// file written holds no constant the privacy rule forbids, unless the pool
// records the user's opt-in.
func TestEncodeKeepsThePrivacyRule(t *testing.T) {
	sig := func(tool, v string) Signature { return Signature{Tool: tool, Value: v} }
	pool := &Pool{
		Version: Version,
		Discriminators: []Discriminator{{Tool: "bash", Arg: "command", Kind: KindWord,
			Values: []string{"Alice", "cat", "python3"}}},
		Patterns: []Pattern{
			{Context: []Signature{StartSignature}, Tool: "get_order", Exact: true,
				Args: []Mapping{{Arg: "order_id", Const: json.RawMessage(`"#W4689314"`)}}, Support: 5, Hits: []int{5}, P: 1},
			{Context: []Signature{StartSignature}, Tool: "search", Exact: true,
				Args: []Mapping{{Arg: "cabin", Const: json.RawMessage(`"economy"`)}, {Arg: "n", Const: json.RawMessage(`3`)}}, Support: 5, Hits: []int{5}, P: 1},
			{Context: []Signature{sig("bash", "cat")}, Tool: "read", Exact: true,
				Args: []Mapping{{Arg: "path", From: &Ref{}, Part: PartArgs, Path: "/name", Prefix: "/home/", Suffix: "/Notes.md"}}, Support: 5, Hits: []int{5}, P: 1},
			{Context: []Signature{sig("bash", "python3")}, Tool: "bash", Support: 5, Hits: []int{5}, P: 1},
			{Context: []Signature{sig("bash", "cat")}, Tool: "bash", Support: 5, Hits: []int{5}, P: 1},
		},
	}
	var b bytes.Buffer
	if err := pool.Encode(&b); err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"#W4689314", "Alice", "python3", "Notes"} {
		if strings.Contains(b.String(), secret) {
			t.Errorf("the pool file holds %q:\n%s", secret, b.String())
		}
	}
	got, err := Decode(b.Bytes())
	if err != nil {
		t.Fatalf("the pool written does not read back: %v\n%s", err, b.String())
	}
	if len(got.Patterns) != 2 || got.Patterns[0].Tool != "search" || got.Patterns[1].Context[0].Value != "cat" {
		t.Errorf("kept %d patterns, want search and bash after cat:\n%s", len(got.Patterns), b.String())
	}
	if len(pool.Patterns) != 5 {
		t.Errorf("Encode changed the pool")
	}

	pool.Mined.KeepValues = true
	b.Reset()
	if err := pool.Encode(&b); err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"#W4689314", "Alice", "python3", "Notes", `"keep_values":true`} {
		if !strings.Contains(b.String(), secret) {
			t.Errorf("opted in, the pool file lacks %q", secret)
		}
	}
}
