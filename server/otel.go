package server

import (
	"context"
	"fmt"
	"os"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// otlpEnv are the standard OpenTelemetry variables that name where spans
// go. ahead exports spans only when one is set, so tracing costs nothing
// until an operator asks for it.
var otlpEnv = []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"}

// newTracerProvider returns a TracerProvider that batches spans to an
// OTLP/HTTP collector configured by the standard OTEL_EXPORTER_OTLP_*
// variables (endpoint, headers, timeout, ...), or nil when none names an
// endpoint. Spans carry version as service.version. Shut it down to
// flush.
func newTracerProvider(ctx context.Context, lookupEnv func(string) (string, bool), version string) (*sdktrace.TracerProvider, error) {
	configured := false
	for _, k := range otlpEnv {
		if v, ok := lookupEnv(k); ok && v != "" {
			configured = true
		}
	}
	if !configured {
		return nil, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("OpenTelemetry exporter: %w", err)
	}
	res := resource.NewSchemaless(
		attribute.String("service.name", serviceName()),
		attribute.String("service.version", version),
	)
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}

// serviceName honours OTEL_SERVICE_NAME, as OpenTelemetry SDKs do.
func serviceName() string {
	if s := os.Getenv("OTEL_SERVICE_NAME"); s != "" {
		return s
	}
	return "ahead"
}
