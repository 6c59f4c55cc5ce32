package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
)

// figure6 is the PASTE paper's policy, exactly as printed.
const figure6 = `speculation_policy:
  default: {allow: false}
  tools:
    web_search: {allow: true, max_speculation: full}
    pip_install: {allow: true, max_speculation: dry_run}
  deduplication: {strategy: max_expected_speculative_utility}
`

func TestParseFigure6(t *testing.T) {
	// The paper's pip_install rule names no dry-run variant; ahead insists
	// on one (see TestParseErrors), so the paper's shape is accepted with
	// the variant added and nothing else changed.
	in := strings.Replace(figure6, "max_speculation: dry_run}", "max_speculation: dry_run, dry_run: {args: {dry_run: true}}}", 1)
	got, err := Parse([]byte(in), "policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := &Policy{
		Tools: map[string]Tool{
			"web_search":  {Allow: true, MaxSpeculation: LevelFull},
			"pip_install": {Allow: true, MaxSpeculation: LevelDryRun, DryRun: DryRun{Args: json.RawMessage(`{"dry_run":true}`)}},
		},
		Dedup: Dedup{Strategy: StrategyMaxUtility},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Parse mismatch (-want +got):\n%s", diff)
	}
	for tool, level := range map[string]Level{"web_search": LevelFull, "pip_install": LevelDryRun, "rm": LevelNone} {
		if got := got.Lookup(tool).Level(); got != level {
			t.Errorf("Lookup(%q).Level() = %v, want %v", tool, got, level)
		}
	}
}

func TestParseFigure6Verbatim(t *testing.T) {
	// The issue requires the paper's shape exactly as printed. Its
	// pip_install rule declares no dry-run variant, so ahead only warms
	// the tool up (the engine's TestDryRunWithoutVariantOnlyWarms).
	got, err := Parse([]byte(figure6), "policy.yaml")
	if err != nil {
		t.Fatalf("Parse(figure 6): %v", err)
	}
	pip := got.Lookup("pip_install")
	if pip.Level() != LevelDryRun || pip.DryRun.Declared("pip_install") {
		t.Errorf("pip_install = %+v, want level dry_run with no declared variant", pip)
	}
}

func TestParseExample(t *testing.T) {
	got, err := Load(filepath.Join("testdata", "policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	yes, no := true, false
	want := &Policy{
		Tools: map[string]Tool{
			"web_search":  {Allow: true, MaxSpeculation: LevelFull, Shared: true, TTL: 30 * time.Second},
			"pip_install": {Allow: true, MaxSpeculation: LevelDryRun, DryRun: DryRun{Args: json.RawMessage(`{"dry_run":true}`)}},
			"read_file":   {Allow: true, Reads: Refs("path"), TTL: 2 * time.Minute},
			"write_file":  {Writes: Refs("path")},
			"run_report":  {Allow: true, ReadOnly: &yes, Cancellable: &no},
			"deploy":      {Allow: true, MaxSpeculation: LevelWarmup},
		},
		Globs: []Glob{{Pattern: "get_*", Tool: Tool{Allow: true}}},
		Dedup: Dedup{Strategy: StrategyMaxUtility, MaxPerTool: 2},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Load mismatch (-want +got):\n%s", diff)
	}
}

func TestParseFields(t *testing.T) {
	yes, no := true, false
	tests := []struct {
		name, rule string
		want       Tool
	}{
		{"allow only", `{allow: true}`, Tool{Allow: true}},
		{"deny", `{allow: false}`, Tool{}},
		{"empty rule", `{}`, Tool{}},
		{"full", `{allow: true, max_speculation: full}`, Tool{Allow: true, MaxSpeculation: LevelFull}},
		{"warmup", `{allow: true, max_speculation: warmup}`, Tool{Allow: true, MaxSpeculation: LevelWarmup}},
		{"explicit none switches off", `{allow: true, max_speculation: none}`, Tool{}},
		{"none without allow", `{max_speculation: none}`, Tool{}},
		{"dry run other tool", `{allow: true, max_speculation: dry_run, dry_run: {tool: t_plan}}`,
			Tool{Allow: true, MaxSpeculation: LevelDryRun, DryRun: DryRun{Tool: "t_plan"}}},
		{"dry run patch canonical", `{allow: true, max_speculation: dry_run, dry_run: {args: {z: [1, 2.50, "x"], a: {check: yes}, n: ~, big: 123456789012345678901234567890}}}`,
			Tool{Allow: true, MaxSpeculation: LevelDryRun, DryRun: DryRun{Args: json.RawMessage(`{"a":{"check":"yes"},"big":123456789012345678901234567890,"n":null,"z":[1,2.50,"x"]}`)}}},
		{"dry run patch yaml numbers", `{allow: true, max_speculation: dry_run, dry_run: {args: {hex: 0x10, plus: +1, dot: .5}}}`,
			Tool{Allow: true, MaxSpeculation: LevelDryRun, DryRun: DryRun{Args: json.RawMessage(`{"dot":0.5,"hex":16,"plus":1}`)}}},
		{"dry run declared above level", `{allow: true, dry_run: {tool: plan}}`, Tool{Allow: true, DryRun: DryRun{Tool: "plan"}}},
		{"read only", `{read_only: true}`, Tool{ReadOnly: &yes}},
		{"not read only", `{allow: true, read_only: false}`, Tool{Allow: true, ReadOnly: &no}},
		{"reads writes", `{reads: path, writes: dest}`, Tool{Reads: Refs("path"), Writes: Refs("dest")}},
		{"shared ttl", `{allow: true, shared: true, ttl: 1h30m}`, Tool{Allow: true, Shared: true, TTL: 90 * time.Minute}},
		{"ttl fraction", `{ttl: 1.5s}`, Tool{TTL: 1500 * time.Millisecond}},
		{"not cancellable", `{allow: true, cancellable: false}`, Tool{Allow: true, Cancellable: &no}},
		{"volatile", `{allow: true, volatile: true}`, Tool{Allow: true, Volatile: true}},
		{"private", `{allow: true, private: true}`, Tool{Allow: true, Private: true}},
		{"reads several", `{reads: [src, dst]}`, Tool{Reads: Refs("src", "dst")}},
		{"reads as path", `{reads: {arg: file, as: path}}`, Tool{Reads: []Ref{{Arg: "file", As: KindPath}}}},
		{"writes mixed list", `{writes: [id, {arg: to, as: url}, {arg: p, as: id}]}`,
			Tool{Writes: []Ref{{Arg: "id"}, {Arg: "to", As: KindURL}, {Arg: "p"}}}},
		{"block style", "\n      allow: true\n      reads: path", Tool{Allow: true, Reads: Refs("path")}},
		{"quoted strings", `{allow: true, max_speculation: "full", reads: 'path'}`, Tool{Allow: true, MaxSpeculation: LevelFull, Reads: Refs("path")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := "speculation_policy:\n  tools:\n    t: " + tt.rule + "\n"
			p, err := Parse([]byte(in), "p.yaml")
			if err != nil {
				t.Fatalf("Parse:\n%s\nerror: %v", in, err)
			}
			if diff := cmp.Diff(tt.want, p.Tools["t"]); diff != "" {
				t.Errorf("rule mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseGlobs(t *testing.T) {
	in := `speculation_policy:
  tools:
    get_*: {allow: true}
    get_secret: {allow: false}
    "*_[0-9]": {allow: true, max_speculation: warmup}
    "?": {allow: true}
    "lit\\*": {allow: true}
`
	p, err := Parse([]byte(in), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	wantGlobs := []string{"get_*", "*_[0-9]", "?", `lit\*`}
	var gotGlobs []string
	for _, g := range p.Globs {
		gotGlobs = append(gotGlobs, g.Pattern)
	}
	if diff := cmp.Diff(wantGlobs, gotGlobs); diff != "" {
		t.Errorf("Globs in file order (-want +got):\n%s", diff)
	}
	for tool, want := range map[string]Level{
		"get_user": LevelFull, "get_secret": LevelNone, "get_1": LevelFull, // first match wins
		"put_1": LevelWarmup, "x": LevelFull, "lit*": LevelFull, "litx": LevelNone, "delete": LevelNone,
	} {
		if got := p.Lookup(tool).Level(); got != want {
			t.Errorf("Lookup(%q).Level() = %v, want %v", tool, got, want)
		}
	}
}

func TestParseDedup(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Dedup
	}{
		{`{strategy: max_probability}`, Dedup{Strategy: StrategyMaxProbability}},
		{`{strategy: all}`, Dedup{Strategy: StrategyAll}},
		{`{max_per_tool: 3}`, Dedup{MaxPerTool: 3}},
		{`{}`, Dedup{}},
	} {
		p, err := Parse([]byte("speculation_policy:\n  deduplication: "+tt.in+"\n"), "p.yaml")
		if err != nil {
			t.Fatalf("%s: %v", tt.in, err)
		}
		if p.Dedup != tt.want {
			t.Errorf("%s: Dedup = %+v, want %+v", tt.in, p.Dedup, tt.want)
		}
	}
}

func TestParseEmptyPolicyDeniesAll(t *testing.T) {
	for _, in := range []string{"speculation_policy: {}\n", "speculation_policy:\n  tools: {}\n"} {
		p, err := Parse([]byte(in), "p.yaml")
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if l := p.Lookup("anything").Level(); l != LevelNone {
			t.Errorf("%q: Lookup(anything).Level() = %v, want none", in, l)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string // every error, in order
	}{
		{"bad level", `
speculation_policy:
  tools:
    web_search:
      allow: true
      max_speculation: ful
`, []string{`policy.yaml:5:24: speculation_policy.tools.web_search.max_speculation: unknown level "ful" (want full, dry_run, warmup or none)`}},
		{"unknown tool field", `
speculation_policy:
  tools:
    web_search: {alow: true}
`, []string{`policy.yaml:3:18: speculation_policy.tools.web_search.alow: unknown field (want allow, max_speculation, dry_run, read_only, reads, writes, shared, ttl, volatile, cancellable or private)`}},
		{"unknown policy field", "speculation_policy:\n  tool: {}\n",
			[]string{`policy.yaml:2:3: speculation_policy.tool: unknown field (want default, tools or deduplication)`}},
		{"other top-level key", "listen: 1.2.3.4:5\nspeculation_policy: {}\n",
			[]string{`policy.yaml:1:1: listen: unknown top-level key (a policy file holds only speculation_policy)`}},
		{"no policy key", "# nothing\n{}\n", []string{`policy.yaml:2:1: no speculation_policy key`}},
		{"empty file", "", []string{`policy.yaml:1: empty policy file (want a speculation_policy mapping)`}},
		{"comment only", "# just a comment\n", []string{`policy.yaml:1: empty policy file (want a speculation_policy mapping)`}},
		{"top level list", "- a\n", []string{`policy.yaml:1:1: want a mapping, got a list`}},
		{"policy null", "speculation_policy:\n", []string{`policy.yaml:1:20: speculation_policy: want a mapping, got nothing (null)`}},
		{"two documents", "speculation_policy: {}\n---\nspeculation_policy: {}\n",
			[]string{`policy.yaml:2:1: a policy file holds one YAML document, found a second`}},
		{"syntax error", "speculation_policy:\n  tools: {a: [\n", []string{`policy.yaml:2: invalid YAML: did not find expected node content`}},
		{"tab indentation", "speculation_policy:\n\ttools: {}\n", []string{`policy.yaml:2: invalid YAML: found character that cannot start any token`}},
		{"reads empty list", "speculation_policy:\n  tools:\n    a: {reads: []}\n",
			[]string{`policy.yaml:3:16: speculation_policy.tools.a.reads: empty list of arguments (omit the field instead)`}},
		{"reads unknown kind", "speculation_policy:\n  tools:\n    a: {reads: {arg: p, as: file}}\n",
			[]string{`policy.yaml:3:29: speculation_policy.tools.a.reads.as: unknown kind "file" (want id, path or url)`}},
		{"writes ref without arg", "speculation_policy:\n  tools:\n    a: {writes: [x, {as: path}]}\n",
			[]string{`policy.yaml:3:21: speculation_policy.tools.a.writes[1]: missing arg (the name of the argument)`}},
		{"writes ref unknown field", "speculation_policy:\n  tools:\n    a: {writes: {arg: x, kind: path}}\n",
			[]string{`policy.yaml:3:26: speculation_policy.tools.a.writes.kind: unknown field (want arg or as)`}},
		{"reads list of numbers", "speculation_policy:\n  tools:\n    a: {reads: [1]}\n",
			[]string{`policy.yaml:3:17: speculation_policy.tools.a.reads[0]: want a string, got a number (1)`}},
		{"volatile not bool", "speculation_policy:\n  tools:\n    a: {volatile: 1}\n",
			[]string{`policy.yaml:3:19: speculation_policy.tools.a.volatile: want true or false, got a number (1)`}},
		{"allow not bool", "speculation_policy:\n  tools:\n    a: {allow: yes}\n",
			[]string{`policy.yaml:3:16: speculation_policy.tools.a.allow: want true or false, got "yes"`}},
		{"allow quoted", "speculation_policy:\n  tools:\n    a: {allow: \"true\"}\n",
			[]string{`policy.yaml:3:16: speculation_policy.tools.a.allow: want true or false, got "true"`}},
		{"level not string", "speculation_policy:\n  tools:\n    a: {allow: true, max_speculation: 3}\n",
			[]string{`policy.yaml:3:39: speculation_policy.tools.a.max_speculation: want a string, got a number (3)`}},
		{"level without allow", "speculation_policy:\n  tools:\n    a: {max_speculation: full}\n",
			[]string{`policy.yaml:3:26: speculation_policy.tools.a.max_speculation: level full has no effect without allow: true`}},
		{"level with allow false", "speculation_policy:\n  tools:\n    a: {allow: false, max_speculation: warmup}\n",
			[]string{`policy.yaml:3:40: speculation_policy.tools.a.max_speculation: level warmup has no effect without allow: true`}},
		{"dry run empty patch", "speculation_policy:\n  tools:\n    pip: {allow: true, max_speculation: dry_run, dry_run: {args: {}}}\n",
			[]string{`policy.yaml:3:66: speculation_policy.tools.pip.dry_run.args: empty argument patch`}},
		{"dry run patch not mapping", "speculation_policy:\n  tools:\n    pip: {dry_run: {args: [1]}}\n",
			[]string{`policy.yaml:3:27: speculation_policy.tools.pip.dry_run.args: want a mapping of arguments to set, got a list`}},
		{"dry run patch infinity", "speculation_policy:\n  tools:\n    pip: {dry_run: {args: {x: .inf}}}\n",
			[]string{`policy.yaml:3:31: speculation_policy.tools.pip.dry_run.args.x: number .inf has no JSON form`}},
		{"dry run patch binary", "speculation_policy:\n  tools:\n    pip: {dry_run: {args: {x: !!binary aGk=}}}\n",
			[]string{`policy.yaml:3:31: speculation_policy.tools.pip.dry_run.args.x: !!binary "aGk=" has no JSON form`}},
		{"dry run patch duplicate", "speculation_policy:\n  tools:\n    pip: {dry_run: {args: {x: 1, x: 2}}}\n",
			[]string{`policy.yaml:3:34: speculation_policy.tools.pip.dry_run.args.x: duplicate key (first at line 3)`}},
		{"dry run unknown field", "speculation_policy:\n  tools:\n    pip: {dry_run: {tools: x}}\n",
			[]string{`policy.yaml:3:21: speculation_policy.tools.pip.dry_run.tools: unknown field (want tool or args)`}},
		{"dry run empty tool", "speculation_policy:\n  tools:\n    pip: {dry_run: {tool: \"\"}}\n",
			[]string{`policy.yaml:3:27: speculation_policy.tools.pip.dry_run.tool: empty tool name`}},
		{"negative ttl", "speculation_policy:\n  tools:\n    a: {ttl: -5s}\n",
			[]string{`policy.yaml:3:14: speculation_policy.tools.a.ttl: must be positive, got -5s (omit ttl for the default)`}},
		{"zero ttl", "speculation_policy:\n  tools:\n    a: {ttl: 0s}\n",
			[]string{`policy.yaml:3:14: speculation_policy.tools.a.ttl: must be positive, got 0s (omit ttl for the default)`}},
		{"ttl number", "speculation_policy:\n  tools:\n    a: {ttl: 30}\n",
			[]string{`policy.yaml:3:14: speculation_policy.tools.a.ttl: want a duration such as 30s or 5m, got a number (30)`}},
		{"ttl bad unit", "speculation_policy:\n  tools:\n    a: {ttl: 3 days}\n",
			[]string{`policy.yaml:3:14: speculation_policy.tools.a.ttl: want a duration such as 30s or 5m, got "3 days"`}},
		{"empty reads", "speculation_policy:\n  tools:\n    a: {reads: \"\"}\n",
			[]string{`policy.yaml:3:16: speculation_policy.tools.a.reads: empty argument name`}},
		{"read only writes", "speculation_policy:\n  tools:\n    a: {read_only: true, writes: path}\n",
			[]string{`policy.yaml:3:9: speculation_policy.tools.a.read_only: a read-only tool cannot declare writes: path`}},
		{"shared writer", "speculation_policy:\n  tools:\n    a: {allow: true, shared: true, writes: path}\n",
			[]string{`policy.yaml:3:22: speculation_policy.tools.a.shared: only read-only tools may share results across sessions (declare read_only: true, or remove writes)`}},
		{"cancellable not bool", "speculation_policy:\n  tools:\n    a: {cancellable: 0}\n",
			[]string{`policy.yaml:3:22: speculation_policy.tools.a.cancellable: want true or false, got a number (0)`}},
		{"duplicate tool", "speculation_policy:\n  tools:\n    a: {allow: true}\n    a: {allow: false}\n",
			[]string{`policy.yaml:4:5: speculation_policy.tools.a: duplicate key (first at line 3)`}},
		{"duplicate field", "speculation_policy:\n  tools:\n    a: {allow: true, allow: false}\n",
			[]string{`policy.yaml:3:22: speculation_policy.tools.a.allow: duplicate key (first at line 3)`}},
		{"duplicate top", "speculation_policy: {}\nspeculation_policy: {}\n",
			[]string{`policy.yaml:2:1: speculation_policy: duplicate key (first at line 1)`}},
		{"empty tool name", "speculation_policy:\n  tools:\n    \"\": {allow: true}\n",
			[]string{`policy.yaml:3:5: speculation_policy.tools."": empty tool name`}},
		{"bad glob", "speculation_policy:\n  tools:\n    \"get_[\": {allow: true}\n",
			[]string{`policy.yaml:3:5: speculation_policy.tools."get_[": bad tool name pattern: syntax error in pattern (patterns use *, ? and [a-z] as in Go's path.Match)`}},
		{"tool rule not mapping", "speculation_policy:\n  tools:\n    a: true\n",
			[]string{`policy.yaml:3:8: speculation_policy.tools.a: want a mapping, got a boolean (true)`}},
		{"tools list", "speculation_policy:\n  tools: [a, b]\n",
			[]string{`policy.yaml:2:10: speculation_policy.tools: want a mapping, got a list`}},
		{"bad strategy", "speculation_policy:\n  deduplication: {strategy: max_utility}\n",
			[]string{`policy.yaml:2:29: speculation_policy.deduplication.strategy: unknown strategy "max_utility" (want max_expected_speculative_utility, max_probability or all)`}},
		{"max per tool zero", "speculation_policy:\n  deduplication: {max_per_tool: 0}\n",
			[]string{`policy.yaml:2:33: speculation_policy.deduplication.max_per_tool: must be at least 1, got 0`}},
		{"max per tool float", "speculation_policy:\n  deduplication: {max_per_tool: 1.5}\n",
			[]string{`policy.yaml:2:33: speculation_policy.deduplication.max_per_tool: want a whole number, got a number (1.5)`}},
		{"dedup unknown", "speculation_policy:\n  deduplication: {stategy: all}\n",
			[]string{`policy.yaml:2:19: speculation_policy.deduplication.stategy: unknown field (want strategy or max_per_tool)`}},
		{"merge key", "base: &b {allow: true}\nspeculation_policy: {}\n",
			[]string{`policy.yaml:1:1: base: unknown top-level key (a policy file holds only speculation_policy)`}},
		{"merge key in rule", "speculation_policy:\n  tools:\n    a: {<<: {allow: true}}\n",
			[]string{`policy.yaml:3:9: speculation_policy.tools.a: merge keys (<<) are not supported; write the fields out`}},
		{"non-string key", "speculation_policy:\n  tools:\n    ? [a]\n    : {}\n",
			[]string{`policy.yaml:3:7: speculation_policy.tools: want a string key, got a list`}},
		{"dotted tool name quoted in path", "speculation_policy:\n  tools:\n    fs.read: {allow: maybe}\n",
			[]string{`policy.yaml:3:22: speculation_policy.tools."fs.read".allow: want true or false, got "maybe"`}},
		{"several errors reported together", "speculation_policy:\n  tools:\n    a: {allow: 1}\n    b: {ttl: x}\n  deduplication: {strategy: no}\n",
			[]string{
				`policy.yaml:3:16: speculation_policy.tools.a.allow: want true or false, got a number (1)`,
				`policy.yaml:4:14: speculation_policy.tools.b.ttl: want a duration such as 30s or 5m, got "x"`,
				`policy.yaml:5:29: speculation_policy.deduplication.strategy: unknown strategy "no" (want max_expected_speculative_utility, max_probability or all)`,
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := strings.TrimPrefix(tt.in, "\n")
			p, err := Parse([]byte(in), "policy.yaml")
			if err == nil {
				t.Fatalf("Parse(%q) = %+v, want errors %q", in, p, tt.want)
			}
			if p != nil {
				t.Errorf("Parse returned a policy with the error")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
			got := strings.Split(err.Error(), "\n")
			if len(got) != len(tt.want) {
				t.Fatalf("Parse(%q) errors:\n%s\nwant %d errors:\n%s", in, err, len(tt.want), strings.Join(tt.want, "\n"))
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tt.want[i]) {
					t.Errorf("error %d:\n got %s\nwant %s", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestParseAliases(t *testing.T) {
	in := `speculation_policy:
  tools:
    read_file: &reader {allow: true, reads: path}
    list_dir: *reader
    pip: {allow: true, max_speculation: dry_run, dry_run: {args: &patch {dry_run: true}}}
    npm: {allow: true, max_speculation: dry_run, dry_run: {args: *patch}}
`
	p, err := Parse([]byte(in), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Tools["list_dir"]; !slices.Equal(got.Reads, Refs("path")) || !got.Allow {
		t.Errorf("aliased rule = %+v", got)
	}
	if got := string(p.Tools["npm"].DryRun.Args); got != `{"dry_run":true}` {
		t.Errorf("aliased patch = %s", got)
	}
}

func TestParseAliasBomb(t *testing.T) {
	// Each level doubles the size of the patch: 2^30 nodes if expanded.
	var b strings.Builder
	b.WriteString("a0: &a0 [x, x]\n")
	for i := 1; i <= 30; i++ {
		fmt.Fprintf(&b, "a%d: &a%d [*a%d, *a%d]\n", i, i, i-1, i-1)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(b.String()+"speculation_policy:\n  tools:\n    t: {dry_run: {args: {x: *a30}}}\n"), &doc); err != nil {
		t.Fatal(err)
	}
	root := doc.Content[0]
	_, err := FromNode(root.Content[len(root.Content)-1], "c.yaml")
	if err == nil || !strings.Contains(err.Error(), "argument patch too large or too deep") {
		t.Errorf("FromNode(alias bomb) error = %v, want a size error", err)
	}
}

func TestFromNode(t *testing.T) {
	config := `listen: 127.0.0.1:7777
backends:
  web: {http: {url: "http://127.0.0.1:9000/{tool}"}}
speculation_policy:
  default: {allow: false}
  tools:
    search: {allow: true, max_speculation: fulll}
`
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(config), &doc); err != nil {
		t.Fatal(err)
	}
	root := doc.Content[0]
	var node *yaml.Node
	for i := 0; i < len(root.Content); i += 2 {
		if root.Content[i].Value == Key {
			node = root.Content[i+1]
		}
	}
	_, err := FromNode(node, "ahead.yaml")
	want := `ahead.yaml:7:44: speculation_policy.tools.search.max_speculation: unknown level "fulll" (want full, dry_run, warmup or none)`
	if err == nil || err.Error() != want {
		t.Errorf("FromNode error = %v\nwant %s", err, want)
	}
	e, ok := errors.AsType[*Error](err)
	if !ok || e.Line != 7 || e.Column != 44 || e.Field != "speculation_policy.tools.search.max_speculation" {
		t.Errorf("errors.AsType[*Error] = %+v, %v", e, ok)
	}

	fixed := strings.Replace(config, "fulll", "full", 1)
	if err := yaml.Unmarshal([]byte(fixed), &doc); err != nil {
		t.Fatal(err)
	}
	p, err := FromNode(doc.Content[0].Content[5], "ahead.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if l := p.Lookup("search").Level(); l != LevelFull {
		t.Errorf("search level = %v, want full", l)
	}
	if _, err := FromNode(nil, "ahead.yaml"); !errors.Is(err, ErrInvalid) {
		t.Errorf("FromNode(nil) = %v, want ErrInvalid", err)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing) = %v, want ErrNotExist", err)
	}
}

func FuzzParse(f *testing.F) {
	seeds := []string{figure6, "", "speculation_policy: {}", "speculation_policy:\n  tools:\n    \"a*\": {allow: true}\n",
		"speculation_policy:\n  tools:\n    a: {allow: true, max_speculation: dry_run, dry_run: {args: {x: [1, {y: .5}]}}}\n",
		"a: &x [*x]\n", "speculation_policy: {tools: {a: {ttl: 1s, shared: true, read_only: true}}}",
		"speculation_policy: {deduplication: {strategy: all, max_per_tool: 2}}",
		"speculation_policy: {tools: {a: {reads: [x, {arg: y, as: path}], writes: {arg: u, as: url}, volatile: true}}}", "- [\n", "speculation_policy: !!binary aGk=",
	}
	if data, err := os.ReadFile(filepath.Join("testdata", "policy.yaml")); err == nil {
		seeds = append(seeds, string(data))
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse(data, "f.yaml")
		if err == nil {
			if p == nil {
				t.Fatal("Parse returned neither a policy nor an error")
			}
			// A policy that parses is self-consistent.
			for name, rule := range p.Tools {
				if rule.TTL < 0 {
					t.Errorf("tool %q: negative TTL", name)
				}
				for _, r := range append(slices.Clone(rule.Reads), rule.Writes...) {
					if r.Arg == "" || r.As.String() == "invalid" {
						t.Errorf("tool %q: bad resource argument %+v", name, r)
					}
				}
				if rule.DryRun.Args != nil && !json.Valid(rule.DryRun.Args) {
					t.Errorf("tool %q: dry-run patch %q is not JSON", name, rule.DryRun.Args)
				}
			}
			return
		}
		// Every error is positioned.
		var errs []error
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			errs = j.Unwrap()
		} else {
			errs = []error{err}
		}
		for _, e := range errs {
			pe, ok := e.(*Error)
			if !ok || pe.Line < 1 || pe.Column < 0 || pe.File != "f.yaml" || pe.Msg == "" {
				t.Errorf("error %#v is not a positioned *Error", e)
			}
		}
	})
}

func TestInvalidates(t *testing.T) {
	p, err := Parse([]byte(`speculation_policy:
  tools:
    read_file: {allow: true, reads: {arg: path, as: path}}
    read_many: {allow: true, reads: {arg: paths, as: path}}
    read_doc: {allow: true, reads: id}
    fetch: {allow: true, reads: {arg: url, as: url}}
    stat: {allow: true}
    write_file: {writes: {arg: path, as: path}}
    move: {writes: [{arg: src, as: path}, {arg: dst, as: path}]}
    write_doc: {writes: id}
    post: {writes: {arg: url, as: url}}
    shell: {}
`), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	j := func(s string) json.RawMessage { return json.RawMessage(s) }
	a, b := j(`{"path":"a"}`), j(`{"path":"b"}`)
	for _, tc := range []struct {
		w     string
		wargs json.RawMessage
		r     string
		rargs json.RawMessage
		want  bool
	}{
		{"write_file", a, "read_file", a, true},
		{"write_file", a, "read_file", b, false},
		{"write_file", a, "stat", a, true},                    // a read naming no resource
		{"write_file", j(`{}`), "read_file", b, true},         // a write naming none
		{"write_file", j(`{"path":7}`), "read_file", b, true}, // a path that is not a string: names none
		{"shell", nil, "read_file", b, true},                  // not read-only: anything
		{"read_file", a, "read_file", a, false},               // reads change nothing
		{"stat", nil, "read_file", a, false},
		// Paths are cleaned.
		{"write_file", j(`{"path":"./a"}`), "read_file", a, true},
		{"write_file", j(`{"path":"d/"}`), "read_file", j(`{"path":"d"}`), true},
		{"write_file", j(`{"path":"x/../d//e"}`), "read_file", j(`{"path":"d/e/"}`), true},
		// Issue 23: with no root known, "/a" may be the file "a" names.
		{"write_file", j(`{"path":"/a"}`), "read_file", a, true},
		{"write_file", j(`{"path":"/x/a"}`), "read_file", j(`{"path":"/y/a"}`), true}, // /y may link to /x
		{"write_file", j(`{"path":"/x/a"}`), "read_file", j(`{"path":"/x/b"}`), false},
		// Several resources, and lists.
		{"move", j(`{"src":"a","dst":"b"}`), "read_file", b, true},
		{"move", j(`{"src":"a","dst":"b"}`), "read_file", a, true},
		{"move", j(`{"src":"a","dst":"b"}`), "read_file", j(`{"path":"c"}`), false},
		{"move", j(`{"src":"a"}`), "read_file", j(`{"path":"c"}`), true}, // dst missing: names none
		{"write_file", j(`{"path":"b"}`), "read_many", j(`{"paths":["a","./b"]}`), true},
		{"write_file", j(`{"path":"c"}`), "read_many", j(`{"paths":["a","b"]}`), false},
		{"write_file", j(`{"path":"c"}`), "read_many", j(`{"paths":[]}`), false},
		// Identifiers are exact JSON values, numbers by value.
		{"write_doc", j(`{"id":7}`), "read_doc", j(`{"id":7.0}`), true},
		{"write_doc", j(`{"id":7}`), "read_doc", j(`{"id":"7"}`), false},
		{"write_doc", j(`{"id":"./a"}`), "read_doc", j(`{"id":"a"}`), false},
		// A path and an id of the same string name one resource.
		{"write_doc", j(`{"id":"a"}`), "read_file", j(`{"path":"./a"}`), true},
		// URLs: scheme and host case, default port, trailing slash, fragment.
		{"post", j(`{"url":"HTTPS://Example.COM:443/a/"}`), "fetch", j(`{"url":"https://example.com/a#top"}`), true},
		{"post", j(`{"url":"http://example.com"}`), "fetch", j(`{"url":"http://EXAMPLE.com/"}`), true},
		{"post", j(`{"url":"https://example.com/A"}`), "fetch", j(`{"url":"https://example.com/a"}`), false},
		{"post", j(`{"url":"https://example.com/a?x=1"}`), "fetch", j(`{"url":"https://example.com/a?x=2"}`), false},
	} {
		if got := p.Invalidates(tc.w, tc.wargs, tc.r, tc.rargs); got != tc.want {
			t.Errorf("Invalidates(%s %s, %s %s) = %v, want %v", tc.w, tc.wargs, tc.r, tc.rargs, got, tc.want)
		}
	}
}

func TestResources(t *testing.T) {
	for _, tc := range []struct {
		args string
		refs []Ref
		want []string
		ok   bool
	}{
		{`{"p":"a"}`, Refs("p"), []string{`"a"`}, true},
		{`{"p":["b","a","b"]}`, Refs("p"), []string{`"a"`, `"b"`}, true},
		{`{"p":{"y":1,"x":2}}`, Refs("p"), []string{`{"x":2,"y":1}`}, true},
		{`{"p":"./a/","q":"a"}`, []Ref{{Arg: "p", As: KindPath}, {Arg: "q", As: KindPath}}, []string{`"a"`}, true},
		{`{"p":""}`, []Ref{{Arg: "p", As: KindPath}}, []string{`"."`}, true},
		{`{"u":"mailto:X@Y"}`, []Ref{{Arg: "u", As: KindURL}}, []string{`"mailto:X@Y"`}, true},
		{`{"p":1}`, []Ref{{Arg: "p", As: KindPath}}, nil, false},
		{`{}`, Refs("p"), nil, false},
		{`not json`, Refs("p"), nil, false},
		{`{"p":"a"}`, nil, nil, false},
	} {
		got, ok := Resources(json.RawMessage(tc.args), tc.refs)
		if ok != tc.ok || !slices.Equal(got, tc.want) {
			t.Errorf("Resources(%s, %v) = %q, %v; want %q, %v", tc.args, tc.refs, got, ok, tc.want, tc.ok)
		}
	}
}
