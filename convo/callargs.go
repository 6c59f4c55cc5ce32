package convo

import (
	"encoding/json"
	"slices"
	"strings"
)

// callArgs is what observe reads of a call's arguments, whatever the
// model: parsed once per distinct arguments when mining (lexicon.go).
type callArgs struct {
	ok   bool      // the arguments are a JSON object
	args []callArg // by name
	// text is the call's segment's text: each value written (callArg.val)
	// and a line break.
	text string
	// mined, when the lexicon read the call, is what mining's replays
	// read of it (tableMiner.call, instances); nil: they read the JSON.
	mined *minedArgs
}

// minedArgs is what mining reads of a call's arguments, by argument as
// callArgs.args.
type minedArgs struct {
	vals []minedArg
	keys string // the names, sorted, joined by 0 bytes (a key set)
	// same: two scalar values are equal; sameOK: there are two
	// (sameValues).
	same, sameOK bool
}

// minedArg is an argument's value as mining reads it (argvalues.go).
type minedArg struct {
	canon    string // canonValue, if canonOK
	canonOK  bool
	v, kind  string // scalar, v if scalarOK
	scalarOK bool
	h        uint64 // valueHash, if hOK
	hOK      bool
}

type callArg struct {
	name   string
	scalar bool   // a string or a number, hashed in h
	h      uint64 // hash of the string's text or the number's JSON
	val    string // the value written in the call's segment, or ""
}

// parseCall reads a call's arguments for observe; mined: for mining too
// (callArgs.mined).
func parseCall(raw json.RawMessage, mined bool) *callArgs {
	ca := &callArgs{}
	var args map[string]json.RawMessage
	if json.Unmarshal(raw, &args) != nil {
		return ca
	}
	defer func() {
		if mined {
			ca.mined = mineArgs(ca, args)
		}
	}()
	ca.ok = true
	ca.args = make([]callArg, 0, len(args))
	for k := range args {
		ca.args = append(ca.args, callArg{name: k})
	}
	slices.SortFunc(ca.args, func(a, b callArg) int { return strings.Compare(a.name, b.name) })
	var text strings.Builder
	for n := range ca.args {
		a := &ca.args[n]
		v := args[a.name]
		var s string
		if len(v) > 0 && v[0] == '"' {
			if json.Unmarshal(v, &s) != nil {
				continue
			}
		} else if len(v) == 0 || (v[0] != '-' && (v[0] < '0' || v[0] > '9')) {
			continue
		} else {
			s = string(v)
		}
		a.scalar, a.h = true, hashString(s)
		// An empty value writes nothing: its line would shift the
		// offsets of the values after it (observe skips it).
		if s == "" || len(s) > maxTokenLen || strings.ContainsAny(s, " \t\n") {
			continue
		}
		a.val = s
		text.WriteString(s)
		text.WriteByte('\n')
	}
	ca.text = text.String()
	return ca
}

// mineArgs reads a call's arguments, parsed in ca and args, as mining
// does.
func mineArgs(ca *callArgs, args map[string]json.RawMessage) *minedArgs {
	ma := &minedArgs{vals: make([]minedArg, len(ca.args))}
	keys := make([]string, len(ca.args))
	for i, a := range ca.args {
		keys[i] = a.name
		raw := args[a.name]
		m := &ma.vals[i]
		m.canon, m.canonOK = canonValue(raw)
		m.v, m.kind, m.scalarOK = scalar(raw)
		m.h, m.hOK = valueHash(raw)
	}
	ma.keys = strings.Join(keys, "\x00")
	_, ma.same, ma.sameOK = sameValues(nil, args, keys)
	return ma
}
