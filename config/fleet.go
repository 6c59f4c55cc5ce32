package config

import (
	"net"
	"net/url"
	"regexp"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/ahead-dev/ahead/yamlnode"
)

// Fleet is the fleet block: the NATS JetStream server or cluster this
// replica shares writes with (package fleet). Exactly one of URL and
// Embedded is set. Zero durations and sizes keep package fleet's defaults.
type Fleet struct {
	// URL is the server or cluster to join: nats://HOST:PORT or
	// tls://HOST:PORT, several separated by commas.
	URL string
	// Embedded runs the server inside this ahead.
	Embedded *FleetEmbedded
	// Name prefixes the fleet's stream and subjects ("" : "ahead").
	Name string
	// FenceTimeout bounds the wait before a shared-state result is reused;
	// AnnounceTimeout bounds the wait before a write is forwarded.
	FenceTimeout, AnnounceTimeout time.Duration
	// MaxBytes and MaxAge bound the invalidation stream.
	MaxBytes int64
	MaxAge   time.Duration
	// ShareConversation publishes the messages heard, with their text, on
	// the fleet's trace stream for mining the conversation model (true
	// unless the block says share_conversation: false, which keeps message
	// text on this replica; calls are shared either way).
	ShareConversation bool
	// LeaseTTL is how long the fleet's mining lease outlives its holder's
	// last renewal (0: package fleet's default, 2 min): a miner that dies
	// without giving it up (killed, frozen, cut off) is replaced after it.
	// It must exceed the time one mining takes; the lease bucket has one
	// TTL, set by the replica that created or last updated it.
	LeaseTTL time.Duration
}

// FleetEmbedded is the embedded server of a fleet block.
type FleetEmbedded struct {
	Listen   string // HOST:PORT other replicas join
	Dir      string // JetStream's store, resolved against the file's directory
	MaxStore int64  // bound of the store (0: package fleet's default)
}

// MinLeaseTTL is the shortest lease_ttl a fleet block takes.
const MinLeaseTTL = time.Second

var (
	fieldsFleet         = []string{"url", "embedded", "name", "fence_timeout", "announce_timeout", "max_bytes", "max_age", "share_conversation", "lease_ttl"}
	fieldsFleetEmbedded = []string{"listen", "dir", "max_store"}
	fleetName           = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
)

// CheckFleetURL checks a fleet URL (the url field, or --fleet): one or more
// nats:// or tls:// URLs with a host and port, separated by commas.
func CheckFleetURL(s string) (string, bool) {
	if s == "" {
		return "want nats://HOST:PORT", false
	}
	for u := range strings.SplitSeq(s, ",") {
		pu, err := url.Parse(strings.TrimSpace(u))
		if err != nil || (pu.Scheme != "nats" && pu.Scheme != "tls") || pu.Host == "" {
			return "want nats://HOST:PORT or tls://HOST:PORT, got " + u, false
		}
	}
	return "", true
}

// fleet parses `fleet: URL` or `fleet: {url: URL | embedded: {...}, ...}`.
func (p *parser) fleet(n *yaml.Node, field string) *Fleet {
	n = yamlnode.Resolve(n)
	fc := &Fleet{ShareConversation: true}
	if n.Kind == yaml.ScalarNode {
		s, ok := p.Str(n, field)
		if !ok {
			return nil
		}
		if msg, ok := CheckFleetURL(s); !ok {
			p.Errorf(n, field, "%s", msg)
			return nil
		}
		fc.URL = s
		return fc
	}
	hasURL, hasEmbedded := false, false
	ok := p.Mapping(n, field, func(k, v *yaml.Node, f string) {
		switch k.Value {
		case "url":
			hasURL = true
			if s, ok := p.Str(v, f); ok {
				if msg, ok := CheckFleetURL(s); !ok {
					p.Errorf(v, f, "%s", msg)
					return
				}
				fc.URL = s
			}
		case "embedded":
			hasEmbedded = true
			fc.Embedded = p.fleetEmbedded(v, f)
		case "name":
			if s, ok := p.Str(v, f); ok {
				if !fleetName.MatchString(s) {
					p.Errorf(v, f, "want letters, digits, _ or -, got %q", s)
					return
				}
				fc.Name = s
			}
		case "fence_timeout":
			fc.FenceTimeout, _ = p.duration(v, f)
		case "announce_timeout":
			fc.AnnounceTimeout, _ = p.duration(v, f)
		case "max_bytes":
			fc.MaxBytes, _ = p.bytes(v, f)
		case "max_age":
			fc.MaxAge, _ = p.duration(v, f)
		case "share_conversation":
			fc.ShareConversation, _ = p.Bool(v, f)
		case "lease_ttl":
			if d, ok := p.duration(v, f); ok {
				if d < MinLeaseTTL {
					p.Errorf(v, f, "want at least %s (a mining must finish within it), got %s", MinLeaseTTL, d)
					return
				}
				fc.LeaseTTL = d
			}
		default:
			p.Unknown(k, f, fieldsFleet)
		}
	})
	if !ok {
		return nil
	}
	switch {
	case hasURL != (fc.URL != "") || hasEmbedded != (fc.Embedded != nil):
		return nil // reported
	case fc.URL != "" && fc.Embedded != nil:
		p.Errorf(n, field, "url and embedded are exclusive: join a server, or run one")
		return nil
	case fc.URL == "" && fc.Embedded == nil:
		p.Errorf(n, yamlnode.Join(field, "url"), "missing: the NATS server to join (nats://HOST:PORT), or embedded: {listen: HOST:PORT, dir: DIR}")
		return nil
	}
	return fc
}

func (p *parser) fleetEmbedded(n *yaml.Node, field string) *FleetEmbedded {
	e := &FleetEmbedded{}
	ok := p.Mapping(n, field, func(k, v *yaml.Node, f string) {
		switch k.Value {
		case "listen":
			if s, ok := p.Str(v, f); ok {
				if _, _, err := net.SplitHostPort(s); err != nil {
					p.Errorf(v, f, "want HOST:PORT, got %q", s)
					return
				}
				e.Listen = s
			}
		case "dir":
			e.Dir, _ = p.path(v, f)
		case "max_store":
			e.MaxStore, _ = p.bytes(v, f)
		default:
			p.Unknown(k, f, fieldsFleetEmbedded)
		}
	})
	if !ok {
		return nil
	}
	if e.Dir == "" {
		p.Errorf(n, yamlnode.Join(field, "dir"), "missing: the directory of the embedded server's store")
		return nil
	}
	if e.Listen == "" {
		e.Listen = "127.0.0.1:4222"
	}
	return e
}
