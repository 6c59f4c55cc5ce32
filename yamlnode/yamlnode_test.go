package yamlnode

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
)

// value returns the node of v in the one-line document "v: VALUE".
func value(t *testing.T, yamlValue string) *yaml.Node {
	t.Helper()
	var d Decoder
	root, err := d.Document([]byte("v: "+yamlValue+"\n"), "test file")
	if err != nil {
		t.Fatalf("Document(%q): %v", yamlValue, err)
	}
	return root.Content[1]
}

// messages returns the text of each error recorded by d.
func messages(d *Decoder) []string {
	var out []string
	for _, e := range d.errs {
		out = append(out, e.Error())
	}
	return out
}

func TestErrorText(t *testing.T) {
	for _, tc := range []struct {
		e    Error
		want string
	}{
		{Error{File: "a.yaml", Line: 3, Column: 7, Field: "x.y", Msg: "bad"}, "a.yaml:3:7: x.y: bad"},
		{Error{File: "a.yaml", Line: 3, Msg: "invalid YAML: oops"}, "a.yaml:3: invalid YAML: oops"},
		{Error{Line: 2, Column: 1, Field: "f", Msg: "m"}, "2:1: f: m"},
		{Error{File: "a.yaml", Msg: "no line"}, "a.yaml:1: no line"},
	} {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("%+v.Error() = %q, want %q", tc.e, got, tc.want)
		}
	}
}

func TestDocument(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       string // the error's text; "" for success
	}{
		{"mapping", "a: 1\n", ""},
		{"scalar", "7\n", ""},
		{"syntax error", "a: [\n", "f.yaml:1: invalid YAML: did not find expected node content"},
		{"tab", "a:\n\tb: 1\n", "f.yaml:2: invalid YAML: found character that cannot start any token"},
		{"second document", "a: 1\n---\nb: 2\n", "f.yaml:2:1: a test file holds one YAML document, found a second"},
		{"syntax error in the second document", "a: 1\n---\nb: [\n", "f.yaml:3: invalid YAML: did not find expected node content"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decoder{File: "f.yaml"}
			root, err := d.Document([]byte(tc.data), "test file")
			if tc.want == "" {
				if err != nil || root == nil || root.Kind == yaml.DocumentNode {
					t.Fatalf("Document = %v, %v; want the root node", root, err)
				}
				return
			}
			if err == nil || err.Error() != tc.want {
				t.Fatalf("Document error = %v, want %s", err, tc.want)
			}
			if _, ok := errors.AsType[*Error](err); !ok {
				t.Errorf("Document error is a %T, want *Error", err)
			}
			if d.Err() != nil {
				t.Errorf("Document recorded %v; it should only return its error", d.Err())
			}
		})
	}
	for _, empty := range []string{"", "# only a comment\n", "\n\n"} {
		var d Decoder
		if _, err := d.Document([]byte(empty), "test file"); err != ErrEmpty {
			t.Errorf("Document(%q) error = %v, want ErrEmpty", empty, err)
		}
	}
}

// wrapped is a package's own error type, as policy.Error is.
type wrapped Error

func (e *wrapped) Error() string { return (*Error)(e).Error() }

func TestWrap(t *testing.T) {
	d := Decoder{File: "f.yaml", Wrap: func(e *Error) error { return (*wrapped)(e) }}
	if _, err := d.Document([]byte("a: [\n"), "test file"); err == nil {
		t.Fatal("no syntax error")
	} else if _, ok := err.(*wrapped); !ok {
		t.Errorf("Document error is a %T, want *wrapped", err)
	}
	root, err := d.Document([]byte("a: 1\n"), "test file")
	if err != nil {
		t.Fatal(err)
	}
	d.Errorf(root.Content[1], "a", "no %s", "good")
	other := errors.New("found elsewhere")
	d.Add(other)
	d.Add(nil)
	if len(d.errs) != 2 {
		t.Fatalf("recorded %d errors, want 2", len(d.errs))
	}
	if w, ok := d.errs[0].(*wrapped); !ok || w.Error() != "f.yaml:1:4: a: no good" {
		t.Errorf("first error = %#v, want a *wrapped at 1:4", d.errs[0])
	}
	if !errors.Is(d.Err(), other) {
		t.Errorf("Err() = %v, want it to hold the added error", d.Err())
	}
	if err := new(Decoder).Err(); err != nil {
		t.Errorf("zero Decoder's Err() = %v, want nil", err)
	}
}

func TestMapping(t *testing.T) {
	type visit struct{ Key, Field string }
	for _, tc := range []struct {
		name, data string
		visits     []visit
		errs       []string
	}{
		{"file order", "b: 1\na: 2\nc: 3\n", []visit{{"b", "top.b"}, {"a", "top.a"}, {"c", "top.c"}}, nil},
		{"empty", "{}\n", nil, nil},
		{"quoted keys", "'a.b': 1\n'': 2\n'x y': 3\n'[0]': 4\n",
			[]visit{{"a.b", `top."a.b"`}, {"", `top.""`}, {"x y", `top."x y"`}, {"[0]", `top."[0]"`}}, nil},
		{"duplicate", "a: 1\nb: 2\na: 3\n", []visit{{"a", "top.a"}, {"b", "top.b"}},
			[]string{"f.yaml:3:1: top.a: duplicate key (first at line 1)"}},
		{"merge key", "x: &x {a: 1}\n<<: *x\n", []visit{{"x", "top.x"}},
			[]string{"f.yaml:2:1: top: merge keys (<<) are not supported; write the fields out"}},
		{"null key", "~: 1\nb: 2\n", []visit{{"b", "top.b"}}, []string{"f.yaml:1:1: top: want a string key, got nothing (null)"}},
		{"list key", "? [a]\n: 1\n", nil, []string{"f.yaml:1:3: top: want a string key, got a list"}},
		{"number and boolean keys are strings", "1: a\ntrue: b\n", []visit{{"1", "top.1"}, {"true", "top.true"}}, nil},
		{"alias key", "a: &k b\n*k : 2\n", []visit{{"a", "top.a"}, {"b", "top.b"}}, nil},
		{"not a mapping", "[a, b]\n", nil, []string{"f.yaml:1:1: top: want a mapping, got a list"}},
		{"scalar", "hello\n", nil, []string{`f.yaml:1:1: top: want a mapping, got "hello"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decoder{File: "f.yaml"}
			root, err := d.Document([]byte(tc.data), "test file")
			if err != nil {
				t.Fatal(err)
			}
			var visits []visit
			ok := d.Mapping(root, "top", func(k, v *yaml.Node, field string) {
				visits = append(visits, visit{k.Value, field})
			})
			if diff := cmp.Diff(tc.visits, visits); diff != "" {
				t.Errorf("visits (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.errs, messages(&d)); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
			if ok != (len(tc.errs) == 0) {
				t.Errorf("Mapping returned %v with errors %q", ok, tc.errs)
			}
		})
	}
}

func TestMappingFollowsAliases(t *testing.T) {
	d := Decoder{File: "f.yaml"}
	root, err := d.Document([]byte("base: &b {x: 1, y: 2}\nuse: *b\n"), "test file")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	d.Mapping(root.Content[3], "use", func(k, v *yaml.Node, field string) { keys = append(keys, field+"="+v.Value) })
	if diff := cmp.Diff([]string{"use.x=1", "use.y=2"}, keys); diff != "" || d.Err() != nil {
		t.Errorf("aliased mapping (-want +got):\n%s\nerrors: %v", diff, d.Err())
	}
}

func TestUnknown(t *testing.T) {
	d := Decoder{File: "f.yaml"}
	root, err := d.Document([]byte("colour: red\n"), "test file")
	if err != nil {
		t.Fatal(err)
	}
	d.Mapping(root, "paint", func(k, v *yaml.Node, field string) { d.Unknown(k, field, []string{"color", "size", "finish"}) })
	want := []string{"f.yaml:1:1: paint.colour: unknown field (want color, size or finish)"}
	if diff := cmp.Diff(want, messages(&d)); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

func TestScalars(t *testing.T) {
	type result struct {
		Value any
		OK    bool
		Errs  []string
	}
	str := func(d *Decoder, n *yaml.Node) (any, bool) { return d.Str(n, "v") }
	boolean := func(d *Decoder, n *yaml.Node) (any, bool) { return d.Bool(n, "v") }
	intMin := func(min int) func(d *Decoder, n *yaml.Node) (any, bool) {
		return func(d *Decoder, n *yaml.Node) (any, bool) { return d.Int(n, "v", min) }
	}
	for _, tc := range []struct {
		name   string
		decode func(*Decoder, *yaml.Node) (any, bool)
		value  string
		want   result
	}{
		{"string", str, "hello", result{"hello", true, nil}},
		{"quoted number is a string", str, `"7"`, result{"7", true, nil}},
		{"empty string", str, `''`, result{"", true, nil}},
		{"number is not a string", str, "7", result{"", false, []string{"f:1:4: v: want a string, got a number (7)"}}},
		{"null is not a string", str, "~", result{"", false, []string{"f:1:4: v: want a string, got nothing (null)"}}},
		{"list is not a string", str, "[a]", result{"", false, []string{"f:1:4: v: want a string, got a list"}}},
		{"binary is not a string", str, "!!binary aGk=", result{"", false, []string{`f:1:4: v: want a string, got !!binary "aGk="`}}},
		{"true", boolean, "true", result{true, true, nil}},
		{"false", boolean, "false", result{false, true, nil}},
		{"quoted true is not a boolean", boolean, `"true"`, result{false, false, []string{`f:1:4: v: want true or false, got "true"`}}},
		{"yes is not a boolean", boolean, "yes", result{false, false, []string{`f:1:4: v: want true or false, got "yes"`}}},
		{"whole number", intMin(1), "12", result{12, true, nil}},
		{"zero allowed", intMin(0), "0", result{0, true, nil}},
		{"zero not allowed", intMin(1), "0", result{0, false, []string{"f:1:4: v: must be at least 1, got 0"}}},
		{"negative", intMin(0), "-2", result{0, false, []string{"f:1:4: v: must not be negative, got -2"}}},
		{"below a larger minimum", intMin(3), "2", result{0, false, []string{"f:1:4: v: must be at least 3, got 2"}}},
		{"fraction", intMin(0), "1.5", result{0, false, []string{"f:1:4: v: want a whole number, got a number (1.5)"}}},
		{"word", intMin(0), "many", result{0, false, []string{`f:1:4: v: want a whole number, got "many"`}}},
		{"too big", intMin(0), "99999999999999999999", result{0, false, []string{"f:1:4: v: want a whole number, got a number (99999999999999999999)"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decoder{File: "f"}
			v, ok := tc.decode(&d, value(t, tc.value))
			if diff := cmp.Diff(tc.want, result{v, ok, messages(&d)}); diff != "" {
				t.Errorf("decoding %s (-want +got):\n%s", tc.value, diff)
			}
		})
	}
}

func TestDescribe(t *testing.T) {
	for _, tc := range []struct{ value, want string }{
		{"{a: 1}", "a mapping"},
		{"[1]", "a list"},
		{"~", "nothing (null)"},
		{"", "nothing (null)"},
		{"true", "a boolean (true)"},
		{"-3", "a number (-3)"},
		{".5", "a number (.5)"},
		{"'it''s'", `"it's"`},
		{"2001-12-14", `!!timestamp "2001-12-14"`},
	} {
		if got := Describe(value(t, tc.value)); got != tc.want {
			t.Errorf("Describe(%s) = %q, want %q", tc.value, got, tc.want)
		}
	}
	if got := Describe(&yaml.Node{Kind: yaml.DocumentNode}); got != "an empty document" {
		t.Errorf("Describe(document) = %q", got)
	}
	if got := Describe(&yaml.Node{}); got != "nothing" {
		t.Errorf("Describe(zero node) = %q", got)
	}
}

func TestJoin(t *testing.T) {
	for _, tc := range []struct{ field, key, want string }{
		{"", "a", "a"},
		{"a", "b", "a.b"},
		{"a.b", "c_d", "a.b.c_d"},
		{"a", "", `a.""`},
		{"a", "x.y", `a."x.y"`},
		{"a", "x y", `a."x y"`},
		{"a", "x[0]", `a."x[0]"`},
		{"a", `say "hi"`, `a."say \"hi\""`},
		{"", "it's", `"it's"`},
		{"a", "mcp:x", "a.mcp:x"},
	} {
		if got := Join(tc.field, tc.key); got != tc.want {
			t.Errorf("Join(%q, %q) = %s, want %s", tc.field, tc.key, got, tc.want)
		}
	}
}

func TestOr(t *testing.T) {
	for _, tc := range []struct {
		words []string
		want  string
	}{
		{nil, ""},
		{[]string{"a"}, "a"},
		{[]string{"a", "b"}, "a or b"},
		{[]string{"a", "b", "c"}, "a, b or c"},
	} {
		if got := Or(tc.words); got != tc.want {
			t.Errorf("Or(%q) = %q, want %q", tc.words, got, tc.want)
		}
	}
}

func TestResolveBound(t *testing.T) {
	// yaml.v3 never makes an alias of an alias; a hand-built cycle must
	// still end.
	a := &yaml.Node{Kind: yaml.AliasNode}
	b := &yaml.Node{Kind: yaml.AliasNode, Alias: a}
	a.Alias = b
	if got := Resolve(a); got.Kind != yaml.AliasNode {
		t.Errorf("Resolve(cycle) = %v", got)
	}
	target := &yaml.Node{Kind: yaml.ScalarNode, Value: "x"}
	if got := Resolve(&yaml.Node{Kind: yaml.AliasNode, Alias: target}); got != target {
		t.Errorf("Resolve(alias) = %v, want the anchored node", got)
	}
}

// FuzzMapping walks every mapping of an arbitrary YAML document and checks
// what Mapping promises: each key is given once, as a string, with its
// field path, or reported; problems are positioned; nothing panics, and
// aliases (also alias bombs, which the walk's budget cuts short) resolve.
func FuzzMapping(f *testing.F) {
	for _, s := range []string{
		"a: 1\nb: {c: [1, 2, {d: e}]}\n",
		"a: 1\na: 2\n",
		"x: &x {a: 1}\n<<: *x\ny: *x\n",
		"? [a, b]\n: 1\n~: 2\n'': 3\n'a.b': 4\n",
		"a: &a [x, x]\nb: &b [*a, *a]\nc: &c [*b, *b]\nd: [*c, *c]\n",
		"a: [\n", "---\na: 1\n---\nb: 2\n", "", "!!binary aGk=", "a: !!str 1\nb: !!int '2'\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d := Decoder{File: "f.yaml"}
		root, err := d.Document(data, "test file")
		if err != nil {
			if err == ErrEmpty {
				return
			}
			e, ok := err.(*Error)
			if !ok || e.File != "f.yaml" || e.Line < 1 || !strings.HasPrefix(e.Msg, "invalid YAML: ") && !strings.HasSuffix(e.Msg, "found a second") {
				t.Fatalf("Document error %#v is not a positioned *Error", err)
			}
			return
		}
		budget := 2000
		var walk func(n *yaml.Node, field string)
		walk = func(n *yaml.Node, field string) {
			if budget--; budget < 0 {
				return
			}
			n = Resolve(n)
			if n.Kind == yaml.AliasNode {
				t.Fatalf("Resolve left an alias at line %d", n.Line)
			}
			if Describe(n) == "" {
				t.Fatalf("Describe of a %v node is empty", n.Kind)
			}
			switch n.Kind {
			case yaml.SequenceNode:
				for _, e := range n.Content {
					walk(e, field+"[]")
				}
				return
			case yaml.ScalarNode:
				// The typed decoders record exactly one problem, or none.
				before := len(d.errs)
				_, okS := d.Str(n, field)
				_, okB := d.Bool(n, field)
				_, okI := d.Int(n, field, 0)
				failed := 0
				for _, ok := range []bool{okS, okB, okI} {
					if !ok {
						failed++
					}
				}
				if got := len(d.errs) - before; got != failed {
					t.Fatalf("%d decoders failed on %q but %d problems were recorded", failed, n.Value, got)
				}
				if okS && okB {
					t.Fatalf("%q decoded as both a string and a boolean", n.Value)
				}
				return
			case yaml.MappingNode:
			default:
				return
			}
			before := len(d.errs)
			seen := map[string]bool{}
			calls := 0
			type child struct {
				v     *yaml.Node
				field string
			}
			var children []child
			ok := d.Mapping(n, field, func(k, v *yaml.Node, f string) {
				calls++
				if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!null" || k.ShortTag() == "!!merge" {
					t.Fatalf("key %v (%s) given to fn", k.Kind, k.ShortTag())
				}
				if seen[k.Value] {
					t.Fatalf("key %q given twice", k.Value)
				}
				seen[k.Value] = true
				if want := Join(field, k.Value); f != want {
					t.Fatalf("field %q for key %q under %q, want %q", f, k.Value, field, want)
				}
				children = append(children, child{v, f})
			})
			problems := d.errs[before:]
			if calls+len(problems) != len(n.Content)/2 {
				t.Fatalf("%d keys given and %d problems for %d pairs", calls, len(problems), len(n.Content)/2)
			}
			if ok != (len(problems) == 0) {
				t.Fatalf("Mapping returned %v with %d problems", ok, len(problems))
			}
			for _, p := range problems {
				e := p.(*Error)
				if e.Line < 1 || e.Column < 1 || e.File != "f.yaml" || (e.Field != field && !strings.HasPrefix(e.Field, field)) {
					t.Fatalf("problem %#v is not positioned under %q", e, field)
				}
			}
			for _, c := range children {
				walk(c.v, c.field)
			}
		}
		walk(root, "")
	})
}
