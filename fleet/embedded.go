package fleet

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// DefaultMaxStore bounds an embedded server's file store when
// Embedded.MaxStore is 0.
const DefaultMaxStore = 1 << 30

// startEmbedded runs a NATS server with JetStream in this process,
// listening where other replicas can join it, with explicit store limits.
func startEmbedded(e *Embedded, name string) (*server.Server, error) {
	if e.Dir == "" {
		return nil, fmt.Errorf("fleet: embedded server: no dir for its store")
	}
	listen := e.Listen
	if listen == "" {
		listen = "127.0.0.1:4222"
	}
	host, portStr, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, fmt.Errorf("fleet: embedded server: listen %q: %w", listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return nil, fmt.Errorf("fleet: embedded server: listen %q: bad port", listen)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}
	maxStore, maxMem := e.MaxStore, e.MaxMemory
	if maxStore <= 0 {
		maxStore = DefaultMaxStore
	}
	if maxMem <= 0 {
		maxMem = 256 << 20
	}
	srv, err := server.NewServer(&server.Options{
		ServerName:         "ahead-" + name,
		Host:               host,
		Port:               port,
		JetStream:          true,
		StoreDir:           e.Dir,
		JetStreamMaxStore:  maxStore,
		JetStreamMaxMemory: maxMem,
		MaxPayload:         1 << 20,
		NoSigs:             true,
		NoLog:              true,
	})
	if err != nil {
		return nil, fmt.Errorf("fleet: embedded server: %w", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, fmt.Errorf("fleet: embedded server on %s did not start", listen)
	}
	return srv, nil
}
