package convo

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/ahead-dev/ahead/trace"
)

const sharedDir = "/work/shared/traces/"

// loadSplit reads a shared -conv trace and splits it by a metadata field,
// 30% of the keys held out, as ahead mine --split-by does.
func loadSplit(t testing.TB, name, field string, match *regexp.Regexp) (train, test []trace.Session) {
	path := sharedDir + name + ".jsonl.gz"
	meta := sharedDir + name + ".sessions.jsonl"
	if _, err := os.Stat(path); err != nil {
		t.Skipf("shared traces not here: %v", err)
	}
	sessions, err := trace.Collect(trace.NewReader(nil).Events(path))
	if err != nil {
		t.Fatal(err)
	}
	m, err := trace.ReadMeta(meta)
	if err != nil {
		t.Fatal(err)
	}
	split := &trace.Split{Field: field, Match: match, Holdout: 0.3, Meta: m}
	for _, s := range sessions {
		isTest, err := split.Test(s.ID)
		if err != nil {
			t.Fatal(err)
		}
		if isTest {
			test = append(test, s)
		} else {
			train = append(train, s)
		}
	}
	return train, test
}

// TestSharedTraces measures the held-out figures of issue 10 on the
// shared traces (skipped when they are not here, or with -short):
//
//	go test ./convo -run TestSharedTraces -v
func TestSharedTraces(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	t.Run("tau2", func(t *testing.T) {
		train, test := loadSplit(t, "tau2-airline-retail-train-conv", "task_id", nil)
		r, err := Evaluate(t.Context(), train, test, nil)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		r.Print(&b)
		t.Log("\n" + b.String())
		if r.Merged.Ahead.ExactAt3 < r.Patterns.Ahead.ExactAt3 {
			t.Errorf("merged exact_at_3 %.3f below patterns alone %.3f", r.Merged.Ahead.ExactAt3, r.Patterns.Ahead.ExactAt3)
		}
	})
	t.Run("minisweagent", func(t *testing.T) {
		train, test := loadSplit(t, "minisweagent-train-conv", "task_id", regexp.MustCompile(`^(.*)-[0-9]+$`))
		r, err := Evaluate(t.Context(), train, test, nil)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		r.Print(&b)
		t.Log("\n" + b.String())
		if r.Merged.Ahead.ExactAt3 < r.Patterns.Ahead.ExactAt3-0.005 {
			t.Errorf("merged exact_at_3 %.3f below patterns alone %.3f", r.Merged.Ahead.ExactAt3, r.Patterns.Ahead.ExactAt3)
		}
	})
}
