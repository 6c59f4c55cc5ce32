//go:build unix

package command

import (
	"maps"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ahead-dev/ahead/backend"
)

// Issue 23: a call's sweep for the processes that left its group read
// every process's environment before the call returned. A call whose pipes
// are closed returns now while its sweep runs; Close waits for it.
func TestCallDoesNotWaitForSweep(t *testing.T) {
	b, err := New([]string{script(t, `echo done`)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan map[string]bool, 1)
	release := make(chan struct{})
	b.sweeps.pass = func(marks map[string]bool) {
		started <- marks
		<-release
	}
	returned := make(chan backend.Response, 1)
	go func() { // owned: joined below
		resp, err := b.Call(t.Context(), backend.Request{Tool: "t"})
		if err != nil {
			t.Error(err)
		}
		returned <- resp
	}()
	marks := <-started
	if len(marks) != 1 {
		t.Errorf("the sweep got marks %v, want the call's one", marks)
	}
	select {
	case resp := <-returned:
		if resp.Output != "done\n" {
			t.Errorf("Call = %+v, want done", resp)
		}
	case <-time.After(10 * time.Second): // a bound for a broken test
		t.Error("Call did not return while its sweep ran")
	}
	closed := make(chan struct{})
	go func() { b.Close(); close(closed) }() // owned: joined below
	select {
	case <-closed:
		t.Error("Close returned before the sweep ended")
	default:
	}
	close(release)
	<-closed
}

// The marks of calls that end while a sweep runs are swept together, in
// one more pass; the sweeping goroutine ends when none are waiting, and
// after close a sweep runs in its caller.
func TestSweeperBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		passes := make(chan []string, 8)
		release := make(chan struct{}, 8)
		s := &sweeper{pass: func(marks map[string]bool) {
			passes <- slices.Sorted(maps.Keys(marks))
			<-release
		}}
		s.add("a")
		synctest.Wait() // the pass for a is running
		s.add("b")
		s.add("c")
		release <- struct{}{}
		release <- struct{}{}
		synctest.Wait()
		s.close()
		close(passes)
		var got [][]string
		for p := range passes {
			got = append(got, p)
		}
		if len(got) != 2 || !slices.Equal(got[0], []string{"a"}) || !slices.Equal(got[1], []string{"b", "c"}) {
			t.Errorf("passes %v, want [a] then [b c]", got)
		}
		if s.running {
			t.Error("the sweeping goroutine still runs with no mark waiting")
		}
		release <- struct{}{}
		passes2 := make(chan []string, 1)
		s.pass = func(marks map[string]bool) { passes2 <- slices.Sorted(maps.Keys(marks)) }
		s.add("d") // after close: at once, in the caller
		if p := <-passes2; !slices.Equal(p, []string{"d"}) {
			t.Errorf("after close: pass %v, want [d]", p)
		}
	})
}
