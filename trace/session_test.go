package trace

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"testing"
)

func TestSplitPart(t *testing.T) {
	s := &Split{Holdout: 0.5}
	var all []Session
	for i := range 40 {
		all = append(all, Session{ID: fmt.Sprint("s", i)})
	}
	test, err := s.Part(slices.Clone(all), true)
	if err != nil {
		t.Fatal(err)
	}
	train, err := s.Part(slices.Clone(all), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(test) == 0 || len(train) == 0 || len(test)+len(train) != len(all) {
		t.Fatalf("parts of %d sessions: %d test, %d train", len(all), len(test), len(train))
	}
	for _, ss := range test {
		if in, _ := s.Test(ss.ID); !in {
			t.Errorf("%s in the test part, but Test says train", ss.ID)
		}
	}
	for _, ss := range train {
		if in, _ := s.Test(ss.ID); in {
			t.Errorf("%s in the train part, but Test says test", ss.ID)
		}
	}
}

func TestSplit(t *testing.T) {
	dir := t.TempDir()
	var meta string
	for i := range 200 {
		meta += fmt.Sprintf(`{"session":"s%d","task_id":"proj%d-%d","n":%d}`+"\n", i, i%20, i, i)
	}
	p := writeFile(t, dir, "x.sessions.jsonl", meta)
	m, err := ReadMeta(p)
	if err != nil {
		t.Fatal(err)
	}
	s := &Split{Field: "task_id", Match: regexp.MustCompile(`^(.*)-[0-9]+$`), Holdout: 0.3, Meta: m}
	byKey := make(map[string]bool)
	test := 0
	for i := range 200 {
		id := fmt.Sprint("s", i)
		k, err := s.Key(id)
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprint("proj", i%20); k != want {
			t.Fatalf("key of %s = %q, want %q", id, k, want)
		}
		in, err := s.Test(id)
		if err != nil {
			t.Fatal(err)
		}
		if prev, ok := byKey[k]; ok && prev != in {
			t.Fatalf("sessions of key %s fall on both sides", k)
		}
		byKey[k] = in
		if in {
			test++
		}
	}
	if test == 0 || test == 200 {
		t.Errorf("%d of 200 sessions in the test part: the split is degenerate", test)
	}
	// Stable across processes: FNV-1a of the key, not a seeded hash.
	if got := KeyBucket("proj3"); got != KeyBucket("proj3") || got < 0 || got >= 1 {
		t.Errorf("KeyBucket unstable or out of range: %v", got)
	}
	// A number field is keyed by its JSON text.
	if k, err := (&Split{Field: "n", Meta: m}).Key("s7"); err != nil || k != "7" {
		t.Errorf("number key = %q, %v", k, err)
	}
	for _, bad := range []*Split{
		{Field: "task_id", Meta: m}, // unknown session below
		{Field: "nope", Meta: m},    // missing field
		{Field: "task_id", Match: regexp.MustCompile(`^zzz(.*)$`), Meta: m}, // no match
	} {
		id := "s1"
		if bad.Field == "task_id" && bad.Match == nil {
			id = "unknown"
		}
		if _, err := bad.Test(id); err == nil {
			t.Errorf("Split%+v.Test(%s): no error", *bad, id)
		}
	}
	if k, err := (&Split{}).Key("abc"); err != nil || k != "abc" {
		t.Errorf("default key = %q, %v; want the session id", k, err)
	}
}

func TestReadMetaErrors(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "x.sessions.jsonl", `{"session":"a"}`+"\n"+`{"task":1}`+"\n")
	_, err := ReadMeta(p)
	le, ok := errors.AsType[*LineError](err)
	if !ok || le.Line != 2 || le.Field != "session" {
		t.Errorf("error = %v, want line 2 field session", err)
	}
}
