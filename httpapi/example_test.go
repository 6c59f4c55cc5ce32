package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ahead-dev/ahead/backend"
	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/httpapi"
)

// A tool call through the HTTP API: the agent POSTs the tool and its
// arguments for its session, and gets the result with how it was served.
func ExampleNew() {
	reg := prometheus.NewRegistry()
	eng := engine.New(&engine.Options{
		Backends: map[string]engine.Backend{"local": {Backend: backend.Funcs{
			"weather": func(ctx context.Context, args json.RawMessage) (string, error) {
				return `{"city": "Lyon", "celsius": 21}`, nil
			},
		}}},
		Registerer: reg,
	})
	defer eng.Close()
	srv := httptest.NewServer(httpapi.New(eng, &httpapi.Options{Gatherer: reg}))
	defer srv.Close()

	resp, err := http.Post(srv.URL+"/v1/sessions/agent-7/calls", "application/json",
		strings.NewReader(`{"tool": "weather", "args": {"city": "Lyon"}}`))
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Print(resp.Status, " ", string(body))
	// Output: 200 OK {"tool":"weather","status":"ok","output":{"city":"Lyon","celsius":21},"source":"executed","saved_ms":0,"seq":0}
}
