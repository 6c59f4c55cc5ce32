package mcpproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Issue 26: the calls of a 2026-07-28 run over HTTP, answered by ahead
// itself. The Go SDK serves the revision only with a stateless handler,
// which for every request reads and decodes the body twice, decodes _meta
// three times (each decode allocating a 32 KiB buffer), builds and connects
// a server session with its goroutines, hands the request through them and
// closes it all again: about 0.5 ms a call beyond what the older revisions'
// sessions cost (BenchmarkAddedLatencyEras). A run's state is ahead's
// already (runFor), so for the requests an agent makes turn after turn
// (tools/call, the lists, prompts/get, resources/read) ahead reads the one
// JSON-RPC request, serves it in its run as the SDK's handler would, and
// writes the response event. server/discover (once per client) and the
// rest stay with the SDK.
//
// Only a request the SDK would serve normally takes this path: well-formed
// (one request, its headers and _meta as the revision requires, no field
// that needs the SDK's help) and without a progress token (its progress
// needs a stream of its own). Everything else, including every malformed
// request, goes to the SDK's handler untouched, and gets its answer and its
// errors there: the SDK stays the judge of the protocol, ahead only skips
// its machinery where the answer cannot differ.

// runMethods are the methods served on the direct path, and the keys their
// params may have there.
var runMethods = map[string][]string{
	"tools/call":               {"_meta", "name", "arguments"},
	"tools/list":               {"_meta", "cursor"},
	"prompts/list":             {"_meta", "cursor"},
	"prompts/get":              {"_meta", "name", "arguments"},
	"resources/list":           {"_meta", "cursor"},
	"resources/templates/list": {"_meta", "cursor"},
	"resources/read":           {"_meta", "uri"},
}

// runRequest is a 2026-07-28 request read by readRunRequest.
type runRequest struct {
	id     any // the JSON-RPC id: a string or an int64
	method string
	req    mcp.Request
	init   *mcp.InitializeParams // the client, as its _meta says
}

// serveRun serves a 2026-07-28 POST directly if it is one readRunRequest
// accepts, and reports whether it did. If not, r is as it came (its body
// restored) for the SDK's handler.
func (p *Proxy) serveRun(w http.ResponseWriter, r *http.Request) bool {
	if !runHTTPOK(r) {
		return false
	}
	limit := p.opts.MaxBodyBytes
	if limit == 0 {
		limit = mcp.DefaultMaxRequestBodyBytes
	}
	var body []byte
	var err error
	if limit > 0 {
		body, err = io.ReadAll(io.LimitReader(r.Body, limit+1))
	} else {
		body, err = io.ReadAll(r.Body)
	}
	restore := func() {
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
	}
	if err != nil || (limit > 0 && int64(len(body)) > limit) {
		restore()
		return false
	}
	rr, ok := readRunRequest(body, r.Header)
	if !ok {
		restore()
		return false
	}
	// The request's context ends when its client goes away (a broken
	// stream) or the proxy closes, as the stateless handler's does
	// (PropagateRequestCancellation): the engine then lets a call its
	// upstream already has run on, for the client's re-issue to join
	// (s.serve marks a tools/call KeepRunning; engine/orphan.go).
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(p.ctx, cancel)
	defer stop()
	res, err := p.serveRunRequest(ctx, rr)
	writeRunResponse(w, rr.id, res, err)
	return true
}

// serveRunRequest serves a request in the run it names, as the stateless
// handler's session would with receive(true) as its middleware.
func (p *Proxy) serveRunRequest(ctx context.Context, rr *runRequest) (mcp.Result, error) {
	s, end, err := p.runFor(rr.method, rr.req, rr.init)
	if err != nil {
		return nil, err
	}
	defer end()
	res, err := s.serve(ctx, notServed, rr.method, rr.req)
	if err != nil {
		return nil, err
	}
	res = completeResult(res)
	// What the SDK adds to every new-era result: resultType on the lists
	// (completeResult gives the others theirs) and its server's identity.
	switch r := res.(type) {
	case *mcp.ListToolsResult:
		r.ResultType = "complete"
	case *mcp.ListPromptsResult:
		r.ResultType = "complete"
	case *mcp.ListResourcesResult:
		r.ResultType = "complete"
	case *mcp.ListResourceTemplatesResult:
		r.ResultType = "complete"
	}
	meta := maps.Clone(res.GetMeta())
	if meta == nil {
		meta = make(mcp.Meta, 1)
	}
	if _, ok := meta[mcp.MetaKeyServerInfo]; !ok {
		meta[mcp.MetaKeyServerInfo] = &mcp.Implementation{Name: p.opts.Name, Version: p.opts.Version}
	}
	res.SetMeta(meta)
	return res, nil
}

// notServed stands for the SDK's own handler, which the methods of the
// direct path never call.
func notServed(context.Context, string, mcp.Request) (mcp.Result, error) {
	return nil, errMethodNotFound
}

// runHTTPOK reports whether the HTTP side of r is what the SDK's stateless
// handler serves without complaint: POST, JSON in, JSON and a stream
// accepted, no resumption, and a Host the SDK's DNS rebinding protection
// lets through.
func runHTTPOK(r *http.Request) bool {
	if r.Method != http.MethodPost || r.Header.Get("Mcp-Protocol-Version") != newEraVersion ||
		len(r.Header.Values("Last-Event-ID")) > 0 {
		return false
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return false
	}
	jsonOK, streamOK := false, false
	for _, v := range r.Header.Values("Accept") {
		for _, tok := range strings.Split(v, ",") {
			base, _, _ := strings.Cut(tok, ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	if !jsonOK || !streamOK {
		return false
	}
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && la != nil && loopback(la.String()) && !loopback(r.Host) {
		return false
	}
	return true
}

// loopback is the SDK's test of a loopback address (host, or host:port).
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = strings.Trim(addr, "[]")
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// readRunRequest reads body as one JSON-RPC request of the direct path:
// ok is false for anything else (a batch, a notification, a method or a
// field the path does not serve, headers or _meta the SDK would refuse).
// Keys are matched exactly, as the SDK's decoder does.
func readRunRequest(body []byte, h http.Header) (*runRequest, bool) {
	var msg map[string]json.RawMessage
	if err := json.Unmarshal(body, &msg); err != nil || msg == nil {
		return nil, false
	}
	var version, method string
	for k, v := range msg {
		switch k {
		case "jsonrpc":
			if json.Unmarshal(v, &version) != nil || version != "2.0" {
				return nil, false
			}
		case "method":
			if json.Unmarshal(v, &method) != nil {
				return nil, false
			}
		case "id", "params":
		default:
			return nil, false
		}
	}
	keys, ok := runMethods[method]
	if !ok || version == "" || h.Get("Mcp-Method") != method {
		return nil, false
	}
	id, ok := requestID(msg["id"])
	if !ok {
		return nil, false
	}
	var params map[string]json.RawMessage
	if err := json.Unmarshal(msg["params"], &params); err != nil || params == nil {
		return nil, false
	}
	for k := range params {
		if !slices.Contains(keys, k) {
			return nil, false
		}
	}
	meta, init, ok := readRunMeta(params["_meta"], h)
	if !ok {
		return nil, false
	}
	extra := &mcp.RequestExtra{Header: h}
	rr := &runRequest{id: id, method: method, init: init}
	switch method {
	case "tools/call":
		var name string
		if json.Unmarshal(params["name"], &name) != nil || name == "" || h.Get("Mcp-Name") != name {
			return nil, false
		}
		rr.req = &mcp.CallToolRequest{Extra: extra, Params: &mcp.CallToolParamsRaw{Meta: meta, Name: name, Arguments: params["arguments"]}}
	case "prompts/get":
		gp := &mcp.GetPromptParams{Meta: meta}
		if json.Unmarshal(params["name"], &gp.Name) != nil || gp.Name == "" || h.Get("Mcp-Name") != gp.Name {
			return nil, false
		}
		if a, ok := params["arguments"]; ok && json.Unmarshal(a, &gp.Arguments) != nil {
			return nil, false
		}
		rr.req = &mcp.GetPromptRequest{Extra: extra, Params: gp}
	case "resources/read":
		rp := &mcp.ReadResourceParams{Meta: meta}
		if json.Unmarshal(params["uri"], &rp.URI) != nil || rp.URI == "" || h.Get("Mcp-Name") != rp.URI {
			return nil, false
		}
		rr.req = &mcp.ReadResourceRequest{Extra: extra, Params: rp}
	default: // the lists
		var cursor string
		if c, ok := params["cursor"]; ok && json.Unmarshal(c, &cursor) != nil {
			return nil, false
		}
		switch method {
		case "tools/list":
			rr.req = &mcp.ListToolsRequest{Extra: extra, Params: &mcp.ListToolsParams{Meta: meta, Cursor: cursor}}
		case "prompts/list":
			rr.req = &mcp.ListPromptsRequest{Extra: extra, Params: &mcp.ListPromptsParams{Meta: meta, Cursor: cursor}}
		case "resources/list":
			rr.req = &mcp.ListResourcesRequest{Extra: extra, Params: &mcp.ListResourcesParams{Meta: meta, Cursor: cursor}}
		case "resources/templates/list":
			rr.req = &mcp.ListResourceTemplatesRequest{Extra: extra, Params: &mcp.ListResourceTemplatesParams{Meta: meta, Cursor: cursor}}
		}
	}
	return rr, true
}

// requestID returns a JSON-RPC id the SDK keeps as it came: a string, or
// an integer.
func requestID(raw json.RawMessage) (any, bool) {
	if len(raw) == 0 {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil, false
	}
	switch v := v.(type) {
	case string:
		return v, true
	case json.Number:
		if n, err := v.Int64(); err == nil && v.String() == fmt.Sprint(n) {
			return n, true
		}
	}
	return nil, false
}

// readRunMeta reads the _meta of a new-era request: its protocol version
// (the header's), the client's capabilities (required) and identity (if
// any). A log level or a progress token sends the request to the SDK (the
// one needs its validation, the other a stream for the progress).
func readRunMeta(raw json.RawMessage, h http.Header) (mcp.Meta, *mcp.InitializeParams, bool) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, nil, false
	}
	var version string
	if json.Unmarshal(m[mcp.MetaKeyProtocolVersion], &version) != nil || version != h.Get("Mcp-Protocol-Version") {
		return nil, nil, false
	}
	if _, ok := m[mcp.MetaKeyLogLevel]; ok {
		return nil, nil, false
	}
	if _, ok := m["progressToken"]; ok {
		return nil, nil, false
	}
	// The SDK's clientCapabilitiesV2: roots as the revision puts them.
	var caps struct {
		mcp.ClientCapabilities
		Roots *mcp.RootCapabilities `json:"roots,omitempty"`
	}
	if c := m[mcp.MetaKeyClientCapabilities]; !isObject(c) || json.Unmarshal(c, &caps) != nil {
		return nil, nil, false
	}
	init := &mcp.InitializeParams{ProtocolVersion: version, Capabilities: &caps.ClientCapabilities}
	init.Capabilities.RootsV2 = caps.Roots
	if caps.Roots != nil {
		init.Capabilities.Roots = *caps.Roots
	}
	if ci, ok := m[mcp.MetaKeyClientInfo]; ok {
		if !isObject(ci) || json.Unmarshal(ci, &init.ClientInfo) != nil {
			return nil, nil, false
		}
	}
	var meta mcp.Meta
	if err := json.Unmarshal(raw, &meta); err != nil {
		return nil, nil, false
	}
	return meta, init, true
}

func isObject(raw json.RawMessage) bool {
	b := bytes.TrimSpace(raw)
	return len(b) > 0 && b[0] == '{'
}

// writeRunResponse writes the response to request id as the SDK's handler
// does: one event on a stream, or, for the errors the revision gives an
// HTTP status, the JSON-RPC error alone with that status.
func writeRunResponse(w http.ResponseWriter, id any, res mcp.Result, err error) {
	msg := struct {
		JSONRPC string         `json:"jsonrpc"`
		ID      any            `json:"id"`
		Result  mcp.Result     `json:"result,omitempty"`
		Error   *jsonrpc.Error `json:"error,omitempty"`
	}{JSONRPC: "2.0", ID: id, Result: res}
	status := 0
	if err != nil {
		msg.Result = nil
		// As the SDK's jsonrpc2 puts an error on the wire: a JSON-RPC
		// error's code (wrapped or not) with the whole message.
		msg.Error = &jsonrpc.Error{Message: err.Error()}
		if je, ok := errors.AsType[*jsonrpc.Error](err); ok {
			if error(je) == err {
				msg.Error = je
			} else {
				msg.Error.Code = je.Code
			}
		}
		switch msg.Error.Code {
		case jsonrpc.CodeMethodNotFound:
			status = http.StatusNotFound
		case jsonrpc.CodeInvalidParams, mcp.CodeUnsupportedProtocolVersion, mcp.CodeMissingRequiredClientCapabilities:
			status = http.StatusBadRequest
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&msg); err != nil {
		http.Error(w, "ahead: encoding the response: "+err.Error(), http.StatusInternalServerError)
		return
	}
	data := bytes.TrimRight(buf.Bytes(), "\n")
	if status != 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(data)
		return
	}
	w.Header().Set("Cache-Control", "no-cache, no-transform")
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Connection", "keep-alive")
	out := make([]byte, 0, len(data)+32)
	out = append(out, "event: message\ndata: "...)
	out = append(out, data...)
	out = append(out, "\n\n"...)
	_, _ = w.Write(out)
	_ = http.NewResponseController(w).Flush()
}
