package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// countingTools is an HTTP tool backend on loopback (POST /tools/{tool},
// the arguments as the body) that counts executions by path and body, for
// the end-to-end tests of what ahead serve runs and when.
type countingTools struct {
	*httptest.Server
	mu   sync.Mutex // protects runs
	runs map[string]int
}

// newCountingTools starts the backend; answer gives a call's output and
// may also signal the test (it runs after the call is counted).
func newCountingTools(t *testing.T, answer func(path string, body []byte) string) *countingTools {
	c := &countingTools{runs: make(map[string]int)}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		c.mu.Lock()
		c.runs[r.URL.Path+string(body)]++
		c.mu.Unlock()
		io.WriteString(w, answer(r.URL.Path, body))
	}))
	t.Cleanup(c.Close)
	return c
}

// count returns how often the call path+body ran.
func (c *countingTools) count(k string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runs[k]
}
