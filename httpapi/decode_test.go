package httpapi_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/ahead-dev/ahead/httpapi"
)

func TestDecodeCall(t *testing.T) {
	for _, tc := range []struct {
		body     string
		tool     string
		args     string // "" for nil
		badInput string // substring of the error, "" if accepted
	}{
		{body: `{"tool":"a"}`, tool: "a"},
		{body: " \n{\"args\": {\"x\": [1, {}]}, \"tool\": \"read\"}\r\n", tool: "read", args: `{"x": [1, {}]}`},
		{body: `{"tool":"a","args":null}`, tool: "a"},
		{body: `{"tool":"\u00e9\"q"}`, tool: "é\"q"},
		{body: `{"tool":"a","args":{}}`, tool: "a", args: `{}`},
		{body: `{"t\u006fol":"a"}`, tool: "a"},
		{body: `{}`, badInput: `missing field "tool"`},
		{body: `null`, badInput: "got null"},
		{body: `"x"`, badInput: "got a string"},
		{body: `{"tool":null}`, badInput: `"tool" must be a string, got null`},
		{body: `{"tool":"a","args":true}`, badInput: `"args" must be a JSON object, got a boolean`},
		{body: `{"tool":"a","args":1e9}`, badInput: `got a number`},
		{body: `{"tool":"a","Tool":"b"}`, badInput: `unknown field "Tool" at offset 12`},
		{body: `{"tool":"a","args":{},"args":{}}`, badInput: `duplicate field "args" at offset 22`},
		{body: `{"tool":"a",}`, badInput: "invalid JSON at offset 12"},
		{body: `{"tool":"a"`, badInput: "unexpected end of JSON at offset 11"},
		{body: `{"tool":"a"}}`, badInput: "invalid JSON at offset 12: invalid character '}' after top-level value"},
		{body: `{"tool":"a","args":{"x":NaN}}`, badInput: "invalid JSON at offset 24"},
		{body: "{\"tool\":\"a\",\"args\":{\"x\":\"\xc3\x28\"}}", badInput: "invalid UTF-8 at offset 25"},
	} {
		c, err := httpapi.DecodeCall([]byte(tc.body))
		if tc.badInput != "" {
			if err == nil || !strings.Contains(err.Error(), tc.badInput) || !errors.Is(err, httpapi.ErrBadRequest) {
				t.Errorf("DecodeCall(%s) = %+v, %v; want an ErrBadRequest containing %q", tc.body, c, err, tc.badInput)
			}
			continue
		}
		if err != nil {
			t.Errorf("DecodeCall(%s): %v", tc.body, err)
			continue
		}
		if c.Tool != tc.tool || string(c.Args) != tc.args {
			t.Errorf("DecodeCall(%s) = %q, %s; want %q, %s", tc.body, c.Tool, c.Args, tc.tool, tc.args)
		}
	}
}

// FuzzDecodeCall checks DecodeCall against encoding/json: whatever it
// accepts, a strict standard decode accepts too and reads the same tool and
// arguments; and what it returns survives a round trip.
func FuzzDecodeCall(f *testing.F) {
	for _, s := range []string{
		`{"tool":"a"}`, `{"tool":"a","args":{"x":1}}`, `{"args":null,"tool":"b"}`, `{"tool":"a","args":[]}`,
		`{"tool":"a","tool":"a"}`, `{"tool":"a"} x`, `{"tool":""}`, `{"tool":"\ud800"}`, `[]`, ``, `{`,
		`{"tool":"a","args":{"a":{"b":[1,2,{"c":"\u0000"}]}}}`, "{\"tool\":\"\xff\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := httpapi.DecodeCall(body)
		if err != nil {
			if !errors.Is(err, httpapi.ErrBadRequest) {
				t.Fatalf("error %v does not wrap ErrBadRequest", err)
			}
			return
		}
		if c.Tool == "" {
			t.Fatalf("accepted an empty tool: %q", body)
		}
		if c.Args != nil && c.Args[0] != '{' {
			t.Fatalf("accepted args that are not an object: %s", c.Args)
		}
		var std struct {
			Tool *string         `json:"tool"`
			Args json.RawMessage `json:"args"`
		}
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&std); err != nil || dec.More() {
			t.Fatalf("DecodeCall accepted %q, encoding/json does not: %v", body, err)
		}
		if std.Tool == nil || *std.Tool != c.Tool {
			t.Fatalf("tool = %q, encoding/json reads %v", c.Tool, std.Tool)
		}
		if string(std.Args) == "null" {
			std.Args = nil
		}
		if !bytes.Equal(std.Args, c.Args) {
			t.Fatalf("args = %s, encoding/json reads %s", c.Args, std.Args)
		}
		again, err := json.Marshal(map[string]any{"tool": c.Tool, "args": c.Args})
		if err != nil {
			t.Fatal(err)
		}
		c2, err := httpapi.DecodeCall(again)
		if err != nil {
			t.Fatalf("re-encoded call %s rejected: %v", again, err)
		}
		var a1, a2 bytes.Buffer
		if c.Args != nil {
			json.Compact(&a1, c.Args)
		} else {
			a1.WriteString("null")
		}
		if c2.Args != nil {
			json.Compact(&a2, c2.Args)
		} else {
			a2.WriteString("null")
		}
		if c2.Tool != c.Tool || a1.String() != a2.String() {
			t.Fatalf("round trip changed the call: %q %s → %q %s", c.Tool, a1.String(), c2.Tool, a2.String())
		}
	})
}
