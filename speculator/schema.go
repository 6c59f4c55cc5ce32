package speculator

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
)

// checker validates a guess's arguments against its tool's schema: with a
// full JSON Schema validator when the schema resolves, else by the required
// properties and the top-level property types, which catch most of what a
// small model gets wrong.
type checker struct {
	resolved *jsonschema.Resolved
	required []string
	types    map[string][]string // property → allowed JSON types
}

func newChecker(schema json.RawMessage) *checker {
	c := &checker{}
	if len(schema) == 0 {
		return c
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(schema, &s); err == nil {
		if rs, err := s.Resolve(nil); err == nil {
			c.resolved = rs
			return c
		}
	}
	var loose struct {
		Required   []string `json:"required"`
		Properties map[string]struct {
			Type json.RawMessage `json:"type"`
		} `json:"properties"`
	}
	if json.Unmarshal(schema, &loose) != nil {
		return c
	}
	c.required = loose.Required
	c.types = make(map[string][]string)
	for name, p := range loose.Properties {
		var one string
		var many []string
		if json.Unmarshal(p.Type, &one) == nil && one != "" {
			c.types[name] = []string{one}
		} else if json.Unmarshal(p.Type, &many) == nil && len(many) > 0 {
			c.types[name] = many
		}
	}
	return c
}

// check reports why args (a JSON object) do not fit, or nil.
func (c *checker) check(args []byte) error {
	var v map[string]any
	if err := json.Unmarshal(args, &v); err != nil {
		return err
	}
	if v == nil {
		return errors.New("arguments are null")
	}
	if c.resolved != nil {
		return c.resolved.Validate(v)
	}
	for _, r := range c.required {
		if _, ok := v[r]; !ok {
			return fmt.Errorf("missing required property %q", r)
		}
	}
	for name, val := range v {
		want, ok := c.types[name]
		if !ok {
			continue
		}
		got := jsonType(val)
		fits := false
		for _, w := range want {
			if w == got || (w == "number" && got == "integer") {
				fits = true
			}
		}
		if !fits {
			return fmt.Errorf("property %q is %s, want %v", name, got, want)
		}
	}
	return nil
}

func jsonType(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64:
		if x == float64(int64(x)) {
			return "integer"
		}
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	}
	return "object"
}
