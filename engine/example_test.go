package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/ahead-dev/ahead/backend"
	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/policy"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/trace"
)

// An engine in front of two in-process tools, with a policy that lets it
// run the read-only one ahead and a predictor that guesses the read after
// a listing. The agent's read is then served from the speculative run:
// reused if it had finished, promoted if it was still running.
func ExampleNew() {
	pol, err := policy.Parse([]byte(`
speculation_policy:
  tools:
    list_dir:  {allow: true}
    read_file: {allow: true, reads: {arg: path, as: path}}
`), "policy.yaml")
	if err != nil {
		fmt.Println(err)
		return
	}
	tools := backend.Funcs{
		"list_dir": func(context.Context, json.RawMessage) (string, error) { return "notes.md", nil },
		"read_file": func(_ context.Context, args json.RawMessage) (string, error) {
			var a struct{ Path string }
			if err := json.Unmarshal(args, &a); err != nil {
				return "", err
			}
			return "contents of " + a.Path, nil
		},
	}
	// After a listing, the agent reads the first file it lists.
	pred := predict.Func(func(ev trace.Event) []predict.Prediction {
		if ev.Tool != "list_dir" {
			return nil
		}
		name, _, _ := strings.Cut(ev.Output, "\n")
		args, _ := json.Marshal(map[string]string{"path": name})
		return []predict.Prediction{{Tool: "read_file", Args: args, P: 0.9}}
	})
	eng := engine.New(&engine.Options{
		Backends:  map[string]engine.Backend{"local": {Backend: tools}},
		Policy:    pol,
		Predictor: pred,
	})
	defer eng.Close()

	ctx := context.Background()
	res, err := eng.Call(ctx, "session-1", "list_dir", json.RawMessage(`{"path": "."}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Output, res.Source)
	res, err = eng.Call(ctx, "session-1", "read_file", json.RawMessage(`{"path": "notes.md"}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Output, res.Source != engine.Executed)
	// Output:
	// notes.md executed
	// contents of notes.md true
}
