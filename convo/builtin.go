package convo

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
)

// The built-in default (issue 24 item 2): domain-free weights that
// predict argument values from the conversation in a domain ahead has
// never seen, until a model is learnt there. It says how much a value's
// shape, the words around it (the argument's own name words: order_id →
// order, id), its recency, who said it and its place in the sentence say
// that it is the argument, and how the words of a tool's name weigh in
// choosing it. It holds no tool name, no value and no word of a
// conversation: a few numbers, fitted across the tools of the shared
// traces (FitDefault; `ahead mine --default`), never naming one.
// TestBuiltinNamesNothing checks it.

// go generate expands $VARS itself, so the traces' folder is the
// project's: ../shared/traces beside the checkout (README, Measured).
//go:generate go run ../cmd/ahead mine --default -o builtin.json ../../shared/traces/tau2-airline-retail-train-conv.jsonl.gz ../../shared/traces/minisweagent-train-conv.jsonl.gz

//go:embed builtin.json
var builtinJSON []byte

// DefaultVersion is the version of the Default format this package
// writes.
const DefaultVersion = 1

// Default is the built-in default's content: weights, no names.
type Default struct {
	Version int `json:"version"`
	// Weights score an argument's candidate values, as Model.Weights.
	Weights []float64 `json:"weights"`
	// Lambda weighs the words of a tool's name heard from the user
	// against the call sequence in tool choice.
	Lambda float64 `json:"lambda"`
	// NameNear is what one of the argument's own name words near a
	// mention adds to the words-around-it evidence.
	NameNear float64 `json:"name_near"`
	// Calibration maps raw scores to hit rates, as Model.Calibration,
	// observed on sessions whose tools were learnt from other sessions.
	Calibration map[string][]CalPoint `json:"calibration"`
	// What it was fitted on (counts only).
	Sessions int `json:"sessions"`
	Calls    int `json:"calls"`
	Tools    int `json:"tools"`
}

// ErrDefaultVersion is returned when a default file is of another
// version.
var ErrDefaultVersion = errors.New("convo: default version not supported; fit it again")

// ParseDefault reads a default written by Default.Save or FitDefault's
// caller.
func ParseDefault(data []byte) (*Default, error) {
	var d Default
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("convo: reading the default: %w", err)
	}
	if d.Version != DefaultVersion {
		return nil, fmt.Errorf("%w (version %d, this build reads %d)", ErrDefaultVersion, d.Version, DefaultVersion)
	}
	if len(d.Weights) != nFeat {
		return nil, fmt.Errorf("convo: the default has %d weights, want %d", len(d.Weights), nFeat)
	}
	return &d, nil
}

// LoadDefault reads a default from a file (ahead mine --default).
func LoadDefault(path string) (*Default, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	d, err := ParseDefault(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return d, nil
}

// Save writes d as indented JSON to path.
func (d *Default) Save(path string) error {
	b, err := json.MarshalIndent(d, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

var builtin = sync.OnceValues(func() (*Default, error) { return ParseDefault(builtinJSON) })

// Builtin returns the default embedded in the binary. Callers must not
// modify it.
func Builtin() *Default {
	d, err := builtin()
	if err != nil {
		// The embedded file is checked by the tests: a broken one is a
		// broken build.
		panic(err)
	}
	return d
}
