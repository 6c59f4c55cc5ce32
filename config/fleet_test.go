package config_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ahead-dev/ahead/config"
)

func TestParseFleet(t *testing.T) {
	const backend = "backends:\n  b:\n    http: {url: 'http://h/{tool}'}\n"
	for _, tc := range []struct {
		name, file string
		want       *config.Fleet
	}{
		{"none", "", nil},
		{"url alone", "fleet: {url: nats://10.0.0.1:4222}\n", &config.Fleet{URL: "nats://10.0.0.1:4222", ShareConversation: true}},
		{"short form", "fleet: tls://a:4222,tls://b:4222\n", &config.Fleet{URL: "tls://a:4222,tls://b:4222", ShareConversation: true}},
		{"embedded", "fleet:\n  embedded: {listen: 0.0.0.0:4222, dir: nats, max_store: 2GiB}\n  name: prod\n  fence_timeout: 2ms\n  announce_timeout: 20ms\n  max_bytes: 16MiB\n  max_age: 5m\n  lease_ttl: 30s\n",
			&config.Fleet{Embedded: &config.FleetEmbedded{Listen: "0.0.0.0:4222", Dir: "/d/nats", MaxStore: 2 << 30}, Name: "prod",
				FenceTimeout: 2 * time.Millisecond, AnnounceTimeout: 20 * time.Millisecond, MaxBytes: 16 << 20, MaxAge: 5 * time.Minute, ShareConversation: true, LeaseTTL: 30 * time.Second}},
		{"embedded default listen", "fleet: {embedded: {dir: /var/nats}}\n", &config.Fleet{Embedded: &config.FleetEmbedded{Listen: "127.0.0.1:4222", Dir: "/var/nats"}, ShareConversation: true}},
		{"conversation kept local", "fleet: {url: nats://10.0.0.1:4222, share_conversation: false}\n", &config.Fleet{URL: "nats://10.0.0.1:4222"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parse(backend + tc.file)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, c.Fleet); diff != "" {
				t.Errorf("fleet (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseFleetErrors(t *testing.T) {
	const backend = "backends:\n  b:\n    http: {url: 'http://h/{tool}'}\n"
	for _, tc := range []struct{ name, file, want string }{
		{"http url", "fleet: {url: 'http://h:4222'}\n", "a.yaml:4:14: fleet.url: want nats://HOST:PORT or tls://HOST:PORT, got http://h:4222"},
		{"no host", "fleet: nats://\n", "a.yaml:4:8: fleet: want nats://HOST:PORT or tls://HOST:PORT, got nats://"},
		{"both", "fleet: {url: 'nats://h:1', embedded: {dir: x}}\n", "a.yaml:4:8: fleet: url and embedded are exclusive: join a server, or run one"},
		{"neither", "fleet: {name: x}\n", "a.yaml:4:8: fleet.url: missing: the NATS server to join (nats://HOST:PORT), or embedded: {listen: HOST:PORT, dir: DIR}"},
		{"embedded without dir", "fleet: {embedded: {listen: 'a:1'}}\n", "a.yaml:4:19: fleet.embedded.dir: missing: the directory of the embedded server's store"},
		{"bad listen", "fleet: {embedded: {listen: a, dir: x}}\n", `a.yaml:4:28: fleet.embedded.listen: want HOST:PORT, got "a"`},
		{"bad name", "fleet: {url: 'nats://h:1', name: a.b}\n", `a.yaml:4:34: fleet.name: want letters, digits, _ or -, got "a.b"`},
		{"bad timeout", "fleet: {url: 'nats://h:1', fence_timeout: 5}\n", "a.yaml:4:43: fleet.fence_timeout: want a duration with its unit, such as 5s, got 5"},
		{"unknown", "fleet: {url: 'nats://h:1', fence: 1ms}\n", "a.yaml:4:28: fleet.fence: unknown field (want url, embedded, name, fence_timeout, announce_timeout, max_bytes, max_age, share_conversation or lease_ttl)"},
		{"short lease", "fleet: {url: 'nats://h:1', lease_ttl: 500ms}\n", "a.yaml:4:39: fleet.lease_ttl: want at least 1s (a mining must finish within it), got 500ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(backend + tc.file)
			if err == nil || err.Error() != tc.want {
				t.Errorf("error = %v\nwant    %s", err, tc.want)
			}
		})
	}
}
