package engine_test

import (
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/ahead-dev/ahead/engine"
)

func TestSpans(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		h := newHarness(t, engine.Options{TracerProvider: tp, Predictor: predictAfter("list", read("a", 0.9))})
		h.call("s", "list", `{}`)
		time.Sleep(2 * time.Second)
		h.call("s", "read", `{"path":"a"}`)
		if _, err := h.eng.Call(t.Context(), "s", "nosuch", nil); err == nil {
			t.Fatal("unknown tool succeeded")
		}
		type row struct {
			name, tool, source, status string
			code                       codes.Code
		}
		var got []row
		for _, s := range rec.Ended() {
			attrs := map[attribute.Key]string{}
			for _, a := range s.Attributes() {
				attrs[a.Key] = a.Value.Emit()
			}
			got = append(got, row{s.Name(), attrs["ahead.tool"], attrs["ahead.source"], attrs["ahead.status"], s.Status().Code})
		}
		want := []row{
			{"ahead.call", "list", "executed", "ok", codes.Unset},
			{"ahead.speculate", "read", "", "ok", codes.Unset},
			{"ahead.call", "read", "reused", "ok", codes.Unset},
			// The store serves every tool and fails this one: a call
			// that could not be served is an error span.
			{"ahead.call", "nosuch", "", "", codes.Error},
		}
		if len(got) != len(want) {
			t.Fatalf("spans = %+v, want %+v", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("span %d = %+v, want %+v", i, got[i], want[i])
			}
		}
	})
}
