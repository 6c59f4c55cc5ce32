package mcpproxy

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestBarrierWaitsForNotificationsReadBeforeTheResult(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBarrier()
		b.wait(t.Context()) // nothing read: returns at once

		b.read()
		b.read()
		done := make(chan struct{})
		go func() {
			b.wait(t.Context())
			close(done)
		}()
		synctest.Wait()
		b.handled()
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("wait returned with a notification still unhandled")
		default:
		}
		b.handled()
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("wait did not return once every notification was handled")
		}
	})
}

func TestBarrierWaitIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBarrier()
		b.read() // never handled
		start := time.Now()
		b.wait(t.Context())
		if waited := time.Since(start); waited != barrierWait {
			t.Errorf("waited %v, want the cap %v", waited, barrierWait)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		start = time.Now()
		b.wait(ctx)
		if waited := time.Since(start); waited != time.Second {
			t.Errorf("waited %v, want the context's 1s", waited)
		}
	})
}

// TestOrderedConnCountsOnlyOrderedNotifications checks what the wrapped
// connection counts as it reads.
func TestOrderedConnCountsOnlyOrderedNotifications(t *testing.T) {
	b := newBarrier()
	ct, st := mcp.NewInMemoryTransports()
	conn, err := orderedTransport{ct, b}.Connect(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	peer, err := st.Connect(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	id, _ := jsonrpc.MakeID(float64(1))
	for _, m := range []jsonrpc.Message{
		&jsonrpc.Request{Method: "notifications/message"},
		&jsonrpc.Request{Method: "notifications/progress"},
		&jsonrpc.Request{Method: "notifications/tools/list_changed"},
		&jsonrpc.Request{ID: id, Method: "sampling/createMessage"},
		&jsonrpc.Response{ID: id},
	} {
		go peer.Write(t.Context(), m)
		if _, err := conn.Read(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.n != 2 {
		t.Errorf("counted %d notifications, want 2 (message and progress)", b.n)
	}
}
