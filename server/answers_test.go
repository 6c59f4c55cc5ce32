package server

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestSlowReaderCutOverBudget: a client that reads nothing holds its
// answer's bytes until another answer needs the budget; then it is cut,
// and the reading client gets its whole answer (issue 23: 40 clients that
// read nothing held 1 GiB of 8 MiB answers until the write timeout).
func TestSlowReaderCutOverBudget(t *testing.T) {
	const size = 8 << 20 // far more than socket buffers hold
	answer := []byte(strings.Repeat("x", size))
	wrote := make(chan error, 2)
	budget := newAnswers(size + size/2) // one answer fits, two do not
	srv := httptest.NewServer(guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := w.Write(answer)
		wrote <- err
	}), guardOptions{WriteTimeout: time.Minute, Answers: budget}))
	defer srv.Close()

	slow, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	io.WriteString(slow, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	bufio.NewReader(slow).Peek(1) // the answer started; now never read again
	waitHeld(t, budget, size)

	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || len(got) != size {
		t.Errorf("the reading client got %d bytes, %v; want %d", len(got), err, size)
	}
	var cut, whole int
	for range 2 {
		switch err := <-wrote; {
		case errors.Is(err, errAnswerCut):
			cut++
		case err == nil:
			whole++
		default:
			t.Errorf("a write failed with %v, want errAnswerCut", err)
		}
	}
	if cut != 1 || whole != 1 {
		t.Errorf("%d answers cut, %d written whole; want 1 and 1", cut, whole)
	}
	if n := budget.heldBytes(); n != 0 {
		t.Errorf("%d bytes still counted after both answers ended", n)
	}
}

// TestAnswerLargerThanBudgetAlone: an answer larger than the whole budget
// is written when nothing else is.
func TestAnswerLargerThanBudgetAlone(t *testing.T) {
	answer := strings.Repeat("y", 1<<20)
	srv := httptest.NewServer(guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, answer)
	}), guardOptions{Answers: newAnswers(64 << 10)}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(got) != answer {
		t.Errorf("got %d bytes, %v; want the whole %d", len(got), err, len(answer))
	}
}

// waitHeld waits until the answers in flight hold n bytes, which only a
// real socket filling up brings about.
func waitHeld(t *testing.T, a *answers, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for a.heldBytes() != n {
		if time.Now().After(deadline) {
			t.Fatalf("answers in flight hold %d bytes, want %d", a.heldBytes(), n)
		}
		time.Sleep(time.Millisecond)
	}
}
