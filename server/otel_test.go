package server

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

func TestTracerProviderOffWithoutEndpoint(t *testing.T) {
	tp, err := newTracerProvider(t.Context(), func(string) (string, bool) { return "", false }, "test")
	if tp != nil || err != nil {
		t.Errorf("newTracerProvider with no OTLP endpoint = %v, %v; want nil, nil", tp, err)
	}
}

// TestTracerProviderExportsOTLP checks that spans reach an OTLP/HTTP
// collector named by the standard variable.
func TestTracerProviderExportsOTLP(t *testing.T) {
	var mu sync.Mutex
	var got []string
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path+" "+r.Header.Get("Content-Type"))
		mu.Unlock()
		if len(body) == 0 {
			t.Errorf("empty export body")
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")

	tp, err := newTracerProvider(t.Context(), func(k string) (string, bool) {
		if k == "OTEL_EXPORTER_OTLP_ENDPOINT" {
			return collector.URL, true
		}
		return "", false
	}, "test")
	if err != nil || tp == nil {
		t.Fatalf("newTracerProvider = %v, %v", tp, err)
	}
	_, span := tp.Tracer("test").Start(t.Context(), "ahead.call")
	span.End()
	if err := tp.Shutdown(t.Context()); err != nil {
		t.Fatalf("Shutdown (flush): %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0] != "POST /v1/traces application/x-protobuf" {
		t.Errorf("collector saw %q, want one POST /v1/traces of protobuf", got)
	}
}
