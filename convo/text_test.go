package convo

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestSentenceStart: a capitalised word that begins a sentence is marked;
// a name inside one, an acronym, an id or a capitalised word after a
// colon is not.
func TestSentenceStart(t *testing.T) {
	for _, tt := range []struct {
		text, tok string
		want      bool
	}{
		{"Could you help?", "Could", true},
		{"Hi. My name is Ivan Hernandez", "My", true},
		{"Hi. My name is Ivan Hernandez", "Ivan", false},
		{"thanks!\n- Please cancel it", "Please", true},
		{`He said "Sure, go"`, "Sure", false},
		{"The code is W123. JFK to SFO", "JFK", false},
		{"Name: Ivan", "Ivan", false},
		{"ok? I am here", "I", false},
		{"(Maybe later)", "Maybe", true},
	} {
		i := strings.Index(tt.text, tt.tok)
		if got := sentenceStart(tt.text, i); got != tt.want {
			t.Errorf("sentenceStart(%q, %q) = %v, want %v", tt.text, tt.tok, got, tt.want)
		}
	}
}

// TestModelWithoutInitial: a model mined before the sentence-start
// feature existed loads, and scores as it did (the feature weighs 0).
func TestModelWithoutInitial(t *testing.T) {
	m := mineTestdata(t)
	old := *m
	old.Weights = m.Weights[:nFeat-1]
	b, err := json.Marshal(&old)
	if err != nil {
		t.Fatal(err)
	}
	var back Model
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("a model with %d weights: %v", nFeat-1, err)
	}
	if len(back.Weights) != nFeat || back.Weights[fInitial] != 0 {
		t.Errorf("weights %v, want %d with fInitial 0", back.Weights, nFeat)
	}
	old.Weights = m.Weights[:nFeat-2]
	if b, err = json.Marshal(&old); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &back); err == nil {
		t.Errorf("a model with %d weights loaded", nFeat-2)
	}
}
