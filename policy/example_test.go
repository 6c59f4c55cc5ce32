package policy_test

import (
	"fmt"
	"log"

	"github.com/ahead-dev/ahead/policy"
)

func ExampleParse() {
	p, err := policy.Parse([]byte(`
speculation_policy:
  default: {allow: false}
  tools:
    web_search: {allow: true, max_speculation: full, shared: true, ttl: 30s}
    pip_install: {allow: true, max_speculation: dry_run, dry_run: {args: {dry_run: true}}}
  deduplication: {strategy: max_expected_speculative_utility}
`), "policy.yaml")
	if err != nil {
		log.Fatal(err)
	}
	for _, tool := range []string{"web_search", "pip_install", "rm"} {
		rule := p.Lookup(tool)
		fmt.Printf("%s: %s", tool, rule.Level())
		if rule.DryRun.Args != nil {
			fmt.Printf(" with patch %s", rule.DryRun.Args)
		}
		fmt.Println()
	}

	_, err = policy.Parse([]byte(`
speculation_policy:
  tools:
    web_search: {allow: true, max_speculation: ful}
`), "policy.yaml")
	fmt.Println(err)
	// Output:
	// web_search: full
	// pip_install: dry_run with patch {"dry_run":true}
	// rm: none
	// policy.yaml:4:48: speculation_policy.tools.web_search.max_speculation: unknown level "ful" (want full, dry_run, warmup or none)
}

func ExampleLoad() {
	p, err := policy.Load("testdata/policy.yaml")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(p.Lookup("read_file").Reads, p.Lookup("get_user").Level(), p.Lookup("deploy").Level())
	// Output: [path] full warmup
}
