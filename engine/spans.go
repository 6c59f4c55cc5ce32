package engine

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/ahead-dev/ahead/backend"
	"github.com/ahead-dev/ahead/trace"
)

// OpenTelemetry attribute keys of ahead's spans.
const (
	attrTool    = attribute.Key("ahead.tool")
	attrSession = attribute.Key("ahead.session")
	attrSeq     = attribute.Key("ahead.seq")
	attrSource  = attribute.Key("ahead.source")
	attrSavedMS = attribute.Key("ahead.saved_ms")
	attrStatus  = attribute.Key("ahead.status")
	attrP       = attribute.Key("ahead.p")
	attrUtility = attribute.Key("ahead.utility")
)

// startCallSpan starts the span of an authoritative call. The backend call
// runs in its context, so a backend that propagates trace context continues
// the trace.
func (e *Engine) startCallSpan(ctx context.Context, c *authCall) (context.Context, oteltrace.Span) {
	return e.tracer.Start(ctx, "ahead.call",
		oteltrace.WithSpanKind(oteltrace.SpanKindServer),
		oteltrace.WithAttributes(
			attrTool.String(c.tool),
			attrSession.String(c.s.id),
			attrSeq.Int(c.seq),
		))
}

func endCallSpan(span oteltrace.Span, res Result, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	} else {
		span.SetAttributes(
			attrSource.String(string(res.Source)),
			attrSavedMS.Float64(float64(res.Saved.Microseconds())/1000),
			attrStatus.String(string(res.Status)),
		)
	}
	span.End()
}

// startSpecSpan starts the span of a speculative execution: a root span of
// its own (nobody is waiting for it), named for the call it runs.
func (e *Engine) startSpecSpan(ctx context.Context, en *entry) (context.Context, oteltrace.Span) {
	return e.tracer.Start(ctx, "ahead.speculate",
		oteltrace.WithNewRoot(),
		oteltrace.WithSpanKind(oteltrace.SpanKindInternal),
		oteltrace.WithAttributes(
			attrTool.String(en.req.Tool),
			attrSession.String(en.from),
			attrSeq.Int(en.seq),
			attribute.Float64(string(attrP), en.p),
			attribute.Float64(string(attrUtility), en.utility),
		))
}

func endSpecSpan(span oteltrace.Span, resp backend.Response, err error) {
	switch {
	case err != nil:
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	case resp.IsError:
		span.SetAttributes(attrStatus.String(string(trace.StatusError)))
	default:
		span.SetAttributes(attrStatus.String(string(trace.StatusOK)))
	}
	span.End()
}
