package server

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
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

// Issue 23: tool outputs being read count in the budget with the answers.
// A read that would bring the total over it waits until bytes are
// released; when no answer is being written, the oldest read goes on
// (reads alone cannot deadlock); a write whose client has taken nothing
// for silentGrace while others took theirs (stalledGrace when none did)
// is cut for a waiting read; an answer takes over the
// bytes its request's output held.
func TestOutputsWithinBudget(t *testing.T) {
	const k = 1 << 10
	grow := func(h *hold, n int64) <-chan error {
		done := make(chan error, 1)
		go func() { done <- h.Grow(context.Background(), n) }() // owned: its result is received by the test
		return done
	}
	// ready tells, once every goroutine of the bubble is blocked, whether
	// a Grow returned.
	ready := func(done <-chan error) bool {
		synctest.Wait()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Grow: %v", err)
			}
			return true
		default:
			return false
		}
	}
	t.Run("reads wait, the oldest goes on", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			a := newAnswers(1000 * k)
			first, second := a.newHold(), a.newHold()
			if !ready(grow(first, 800*k)) {
				t.Fatal("a read within the budget waited")
			}
			synctest.Wait()
			waiting := grow(second, 400*k)
			synctest.Wait()
			if ready(waiting) {
				t.Fatal("a read over the budget went on while an older one reads")
			}
			if !ready(grow(first, 800*k)) {
				t.Fatal("the oldest read waited with no answer being written: reads alone would deadlock")
			}
			first.end()
			synctest.Wait()
			if !ready(waiting) {
				t.Fatal("a waiting read did not go on once bytes were released")
			}
			if got := a.stats().Bytes; got != 400*k {
				t.Errorf("%d bytes counted, want %d", got, 400*k)
			}
			second.end()
			if got := a.stats().Bytes; got != 0 {
				t.Errorf("%d bytes counted after both requests ended, want 0", got)
			}
		})
	})
	// Issue 23: beside 100 clients reading nothing of 8 MiB answers, a
	// normal call's 3-byte output waited seconds for the budget, which
	// large reads, each holding a part and waiting for more, had filled.
	t.Run("small outputs use the reserve; large ones go oldest first", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			a := newAnswers(1000 * k) // reserve 250k
			rc := http.NewResponseController(httptest.NewRecorder())
			f := a.begin(600*k, rc, nil) // an answer its client is taking
			l1, l2, l3 := a.newHold(), a.newHold(), a.newHold()
			if !ready(grow(l1, 150*k)) {
				t.Fatal("a large read within the budget but the reserve waited")
			}
			second := grow(l2, 250*k)
			if ready(second) {
				t.Fatal("a large read went on into the reserve")
			}
			if !ready(grow(a.newHold(), 3)) {
				t.Fatal("a small read waited behind large ones")
			}
			l1.end() // 150k freed: enough for l3's read, not for l2's
			third := grow(l3, 100*k)
			if ready(third) {
				t.Fatal("a newer large read took the bytes an older one waits for")
			}
			a.end(f)
			if !ready(second) || !ready(third) {
				t.Error("the large reads did not go on once the answer ended")
			}
			if got := a.stats().Bytes; got != 350*k+3 {
				t.Errorf("%d bytes counted, want %d", got, 350*k+3)
			}
			l2.end()
			l3.end()
		})
	})
	// A stdio MCP upstream's reader counts a message in the call it most
	// likely answers until it can tell (mcpproxy/stdio.go), and gives
	// the bytes back if it answers another.
	t.Run("shrink gives bytes back", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			a := newAnswers(1000 * k) // reserve 250k
			first, second := a.newHold(), a.newHold()
			if !ready(grow(first, 600*k)) {
				t.Fatal("a read within the budget waited")
			}
			waiting := grow(second, 600*k)
			if ready(waiting) {
				t.Fatal("a read over the budget went on while an older one reads")
			}
			first.Shrink(560 * k) // 40k left: within the reserve
			if !ready(waiting) {
				t.Fatal("a waiting read did not go on once bytes were given back")
			}
			first.Shrink(100 * k) // more than it holds: all of it
			if got := a.stats().Bytes; got != 600*k {
				t.Errorf("%d bytes counted, want %d", got, 600*k)
			}
			if a.small != 0 {
				t.Errorf("%d bytes counted as small reads, want 0", a.small)
			}
			first.end()
			second.end()
			if got := a.stats().Bytes; got != 0 {
				t.Errorf("%d bytes counted after both requests ended, want 0", got)
			}
		})
	})
	t.Run("a stalled answer gives way", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			a := newAnswers(1000 * k)
			rc := http.NewResponseController(httptest.NewRecorder())
			f := a.begin(900*k, rc, nil)
			waiting := grow(a.newHold(), 200*k)
			synctest.Wait()
			if ready(waiting) {
				t.Fatal("a read over the budget went on at once")
			}
			// No other client took bytes meanwhile: the machine may be
			// starved, not the reader slow.
			time.Sleep(silentGrace)
			synctest.Wait()
			if ready(waiting) || a.wasCut(f) {
				t.Fatalf("after %v with no client taking bytes: read done %v, answer cut %v; want neither", silentGrace, ready(waiting), a.wasCut(f))
			}
			time.Sleep(stalledGrace - silentGrace)
			synctest.Wait()
			if !ready(waiting) || !a.wasCut(f) || a.cuts.Load() != 1 {
				t.Errorf("after %v: read done %v, answer cut %v; want both", stalledGrace, ready(waiting), a.wasCut(f))
			}
		})
	})
	// A loaded machine (a CI run at load 25) left reading clients without
	// a turn for a second: cut, they lost their answers. A client is slow
	// when others take their bytes while it takes none.
	t.Run("a client slower than the others gives way", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			a := newAnswers(1000 * k)
			rec := httptest.NewRecorder()
			slow := a.begin(500*k, http.NewResponseController(rec), nil)
			reading := a.begin(400*k, http.NewResponseController(rec), nil)
			waiting := grow(a.newHold(), 200*k)
			synctest.Wait()
			time.Sleep(silentGrace / 2)
			if !a.next(reading, 0) {
				t.Fatal("the reading client's answer was cut")
			}
			time.Sleep(silentGrace / 2)
			synctest.Wait()
			if !ready(waiting) || !a.wasCut(slow) || a.wasCut(reading) {
				t.Errorf("after %v, another client taking bytes meanwhile: read done %v, slow cut %v, reading cut %v; want the slow one cut",
					silentGrace, ready(waiting), a.wasCut(slow), a.wasCut(reading))
			}
		})
	})
	t.Run("the answer takes over the output", func(t *testing.T) {
		a := newAnswers(1000 * k)
		h := a.newHold()
		if err := h.Grow(t.Context(), 500*k); err != nil {
			t.Fatal(err)
		}
		f := a.begin(600*k, http.NewResponseController(httptest.NewRecorder()), h)
		if got := a.stats().Bytes; got != 600*k {
			t.Errorf("%d bytes counted while the answer is written, want its %d alone", got, 600*k)
		}
		a.end(f)
		h.end()
		if got := a.stats().Bytes; got != 0 {
			t.Errorf("%d bytes counted at the end, want 0", got)
		}
	})
}

// TestHoldEnded: a hold whose request ended (a call that runs on after its
// client left, engine/orphan.go) counts nothing more, and a read of it
// waiting for the budget goes on uncounted: what it read would otherwise
// stay counted for good, as nothing would release it.
func TestHoldEnded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newAnswers(1 << 20)
		full := a.newHold()
		if err := full.Grow(t.Context(), 1<<20); err != nil {
			t.Fatal(err)
		}
		h := a.newHold()
		errc := make(chan error, 1)
		go func() { errc <- h.Grow(t.Context(), 256<<10) }() // waits: the budget is full
		synctest.Wait()
		h.end()
		if err := <-errc; err != nil {
			t.Fatalf("a waiting read of an ended hold: %v", err)
		}
		if err := h.Grow(t.Context(), 512<<10); err != nil {
			t.Fatal(err)
		}
		full.end()
		if st := a.stats(); st.Bytes != 0 {
			t.Errorf("%d bytes counted after both requests ended, want 0", st.Bytes)
		}
	})
}

// TestQueueHeadBehindOlderRead: the suspicion left by the session that
// measured BenchmarkNormalClients' steady state (a tail of about 1 s, once
// 5 s): when no answer is being written, only the oldest read goes on over
// the budget, and the one read that is not queued may be older than the
// queue's head; does nothing move then? It does: a read not queued is one
// that is not waiting for the budget (reading its tool, or a small read,
// which, the oldest, goes on itself), so it grows on past the budget, and
// its answer or its end wakes the head. The head then waits only for an
// answer whose client takes nothing: stalledGrace when no client takes
// bytes, which the steady state's 5 s maximum is.
func TestQueueHeadBehindOlderRead(t *testing.T) {
	const k = 1 << 10
	type result = chan error
	grow := func(h *hold, n int64) result {
		done := make(result, 1)
		go func() { done <- h.Grow(context.Background(), n) }() // owned: its result is received by the test
		return done
	}
	ready := func(done result) bool {
		synctest.Wait()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Grow: %v", err)
			}
			return true
		default:
			return false
		}
	}
	for _, then := range []string{"its request ends", "its answer is written to a client taking nothing"} {
		t.Run(then, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := newAnswers(1000 * k) // reserve 250k
				older, head, behind := a.newHold(), a.newHold(), a.newHold()
				// Each reads its first smallRead (ReadCounted's first
				// Grow for an output of unknown length): older first.
				for _, h := range []*hold{older, head, behind} {
					if !ready(grow(h, smallRead)) {
						t.Fatal("a first small read waited")
					}
				}
				// head and behind queue for more than the budget has;
				// older, the oldest read, is reading its tool: not queued.
				waitHead := grow(head, 700*k)
				waitBehind := grow(behind, 700*k)
				if ready(waitHead) || ready(waitBehind) {
					t.Fatal("a read over the budget went on while an older one reads")
				}
				// The oldest read is never stuck behind the queue: no
				// answer is being written, so it goes on over the budget.
				if !ready(grow(older, 900*k)) {
					t.Fatal("the oldest read, not queued, waited behind the queue's head with no answer being written: nothing moves")
				}
				if ready(waitHead) {
					t.Fatal("the queue's head went on while an older read grows")
				}
				switch then {
				case "its request ends":
					older.end()
					if !ready(waitHead) {
						t.Fatal("the queue's head did not go on when the older read's request ended")
					}
				default:
					f := a.begin(older.n, http.NewResponseController(httptest.NewRecorder()), older)
					if ready(waitHead) {
						t.Fatal("the queue's head went on over the budget beside an answer just begun")
					}
					time.Sleep(stalledGrace)
					if !ready(waitHead) || !a.wasCut(f) {
						t.Fatalf("after %v with no client taking bytes: head done %v, answer cut %v; want both", stalledGrace, ready(waitHead), a.wasCut(f))
					}
					a.end(f)
				}
				if ready(waitBehind) {
					t.Fatal("the read behind the head went on over the budget")
				}
				head.end()
				if !ready(waitBehind) {
					t.Fatal("the read behind the head did not go on once the head's request ended")
				}
				behind.end()
				older.end()
				if got := a.stats().Bytes; got != 0 {
					t.Errorf("%d bytes counted after every request ended, want 0", got)
				}
			})
		})
	}
}
