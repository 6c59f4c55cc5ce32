package config

import (
	"maps"
	"net/http"
	"os"
	"slices"

	"github.com/ahead-dev/ahead/backend"
	cmdbackend "github.com/ahead-dev/ahead/backend/command"
	"github.com/ahead-dev/ahead/backend/remote"
)

// NewBackend builds one configured backend: a *remote.Backend or a command
// backend, each with a Close method the caller calls once the engine is
// closed. Errors only building finds (a URL
// template package remote refuses) are positioned in the file.
func (c *Config) NewBackend(bc Backend) (backend.Backend, error) {
	switch {
	case bc.HTTP != nil:
		h := bc.HTTP
		opts := &remote.Options{Timeout: h.Timeout, MaxResponseBytes: h.MaxResponseBytes}
		if len(h.Headers) > 0 {
			opts.Header = make(http.Header, len(h.Headers))
			for _, k := range slices.Sorted(maps.Keys(h.Headers)) {
				opts.Header.Set(k, h.Headers[k])
			}
		}
		b, err := remote.New(h.URL, opts)
		if err != nil {
			return nil, c.ErrorAt(h.URLPos, "%v", err)
		}
		return b, nil
	case bc.Exec != nil:
		// The configuration's env is added to ahead's own environment, as
		// for MCP upstreams.
		x := bc.Exec
		opts := &cmdbackend.Options{Timeout: x.Timeout, MaxOutputBytes: x.MaxOutputBytes, Dir: x.Dir}
		if len(x.Env) > 0 {
			opts.Env = os.Environ()
			for _, k := range slices.Sorted(maps.Keys(x.Env)) {
				opts.Env = append(opts.Env, k+"="+x.Env[k])
			}
		}
		b, err := cmdbackend.New(x.Command, opts)
		if err != nil {
			return nil, c.ErrorAt(x.CommandPos, "%v", err)
		}
		return b, nil
	}
	return nil, c.ErrorAt(bc.Pos, "want exactly one of http or exec")
}
