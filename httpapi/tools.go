package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/trace"
)

// declarer is an engine that hears the tools declared to a session
// (engine.Engine.Tools).
type declarer interface {
	Tools(ctx context.Context, session, from string, defs []trace.ToolDef) error
}

// tools takes the tools a harness declares to its agent:
// {"tools": [{"name", "description", "input_schema"}]} → 204. The engine
// records them once per session (and again when they change) and predicts
// calls of tools never called before from them (issue 24).
func (h *Handler) tools(w http.ResponseWriter, r *http.Request) {
	d, ok := h.eng.(declarer)
	if !ok {
		writeError(w, http.StatusNotImplemented, "this engine does not hear tool definitions")
		return
	}
	body, ok := h.body(w, r)
	if !ok {
		return
	}
	var req struct {
		Tools *[]trace.ToolDef `json:"tools"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	switch err := dec.Decode(&req); {
	case err != nil:
		writeError(w, http.StatusBadRequest, "decoding tools: "+err.Error())
		return
	case dec.More():
		writeError(w, http.StatusBadRequest, "decoding tools: more than one JSON value")
		return
	case req.Tools == nil:
		writeError(w, http.StatusBadRequest, `tools: "tools" is missing (want a list of {"name", "description", "input_schema"})`)
		return
	}
	for i, t := range *req.Tools {
		if t.Name == "" {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("tools[%d]: \"name\" is missing or empty", i))
			return
		}
		if s := bytes.TrimSpace(t.InputSchema); len(s) > 0 && s[0] != '{' && string(s) != "null" {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("tools[%d] (%s): \"input_schema\" is not a JSON object", i, t.Name))
			return
		}
	}
	if err := d.Tools(r.Context(), r.PathValue("session"), trace.FromHTTP, *req.Tools); err != nil {
		code := http.StatusInternalServerError
		if errors.Is(err, engine.ErrClosed) {
			code = http.StatusServiceUnavailable
		}
		writeError(w, code, err.Error())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
