// Package tracing sets up OpenTelemetry tracing for the apps, off by
// default and on with the standard OTEL_* variables, and instruments the
// clients every app shares: PostgreSQL (pgx, through otelpgx), Redis
// (go-redis, through redisotel, without command arguments) and outgoing
// HTTP (otelhttp on the default transport: the embedding provider, the
// OAuth issuer).
//
// Off, nothing is installed: the global tracer provider stays OpenTelemetry's
// no-op, so the spans the code starts cost a no-op call and record nothing.
//
// Attribute names: the MCP and GenAI memory semantic conventions where they
// exist (docs/operators.md, "Tracing"); spans never carry entry content,
// search queries, tokens or SQL parameters.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/exaring/otelpgx"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentfleet/orchestrator/packages/appenv"
)

// Config says whether and where spans go. ReadConfig fills it from the
// standard variables; the exporters read their own settings
// (OTEL_EXPORTER_OTLP_ENDPOINT, _HEADERS, _TIMEOUT, _COMPRESSION, the
// _TRACES_ forms), and the SDK its sampler (OTEL_TRACES_SAMPLER, _ARG),
// batching (OTEL_BSP_*) and resource (OTEL_SERVICE_NAME,
// OTEL_RESOURCE_ATTRIBUTES).
type Config struct {
	// Exporter is "otlp", "console" or "" (off).
	Exporter string
	// Endpoint is the OTLP endpoint the variables name ("" when the
	// exporter's default, http://localhost:4318, applies).
	Endpoint string
	// AttributeValueLength (OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT, or
	// OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT; -1: unlimited) cuts longer string
	// attributes: the SQL text of the search statements runs to kilobytes,
	// and the first DefaultAttributeValueLength characters name a statement.
	AttributeValueLength int
}

// DefaultAttributeValueLength is the default cut of a string attribute
// (the SDK's own default is none).
const DefaultAttributeValueLength = 1024

// Enabled tells whether spans are exported.
func (c Config) Enabled() bool { return c.Exporter != "" }

// ReadConfig reads the configuration through e. Tracing is on when
// OTEL_TRACES_EXPORTER names an exporter (otlp, console), or when it is
// unset and an OTLP endpoint is (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT); OTEL_SDK_DISABLED=true turns it off
// whatever else is set.
func ReadConfig(e *appenv.Env) Config {
	c := Config{AttributeValueLength: e.Int("OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT",
		e.Int("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", DefaultAttributeValueLength, -1, 1<<24), -1, 1<<24)}
	exp := strings.TrimSpace(e.String("OTEL_TRACES_EXPORTER", ""))
	endpoint := e.String("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", e.String("OTEL_EXPORTER_OTLP_ENDPOINT", ""))
	switch exp {
	case "":
		if endpoint != "" {
			c.Exporter = "otlp"
		}
	case "otlp", "console":
		c.Exporter = exp
	case "none":
	default:
		e.Fail("OTEL_TRACES_EXPORTER", "must be otlp, console or none (got "+exp+")")
	}
	if c.Exporter == "otlp" {
		c.Endpoint = endpoint
		switch p := e.String("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", e.String("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")); p {
		case "http/protobuf":
		default:
			e.Fail("OTEL_EXPORTER_OTLP_PROTOCOL", "must be http/protobuf (the collector's port 4318; grpc and http/json are not built in), got "+p)
		}
		if endpoint != "" && !strings.HasPrefix(endpoint, "http://") && !strings.HasPrefix(endpoint, "https://") {
			e.Fail("OTEL_EXPORTER_OTLP_ENDPOINT", "must be an http(s) URL such as http://127.0.0.1:4318 (got "+endpoint+")")
		}
	}
	if e.Bool("OTEL_SDK_DISABLED", false) {
		c.Exporter = ""
	}
	return c
}

// Setup installs the tracer provider of cfg as the global one, with the
// W3C trace context and baggage propagators, and instruments the default
// HTTP transport. service names the app (service.name, unless
// OTEL_SERVICE_NAME says otherwise). The returned shutdown flushes the
// spans still buffered (call it with a deadline). Off, Setup installs
// nothing and shutdown does nothing.
func Setup(ctx context.Context, cfg Config, service, version string) (shutdown func(context.Context) error, err error) {
	if !cfg.Enabled() {
		return func(context.Context) error { return nil }, nil
	}
	tp, err := NewProvider(ctx, cfg, service, version)
	if err != nil {
		return nil, err
	}
	Install(tp)
	return tp.Shutdown, nil
}

// Start is an app's Setup: on, it logs that tracing is on, and the
// returned stop flushes the last spans within ShutdownTimeout, even once
// ctx is cancelled (call it when the app ends).
func Start(ctx context.Context, cfg Config, service, version string, log *slog.Logger) (stop func(), err error) {
	shutdown, err := Setup(ctx, cfg, service, version)
	if err != nil {
		return nil, err
	}
	if cfg.Enabled() {
		log.Info("tracing on", "exporter", cfg.Exporter, "endpoint", cfg.Endpoint)
	}
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownTimeout)
		defer cancel()
		shutdown(sctx)
	}, nil
}

// NewProvider is the tracer provider Setup installs: cfg's exporter behind
// the SDK's batch span processor, the resource, the span limits; opts are
// applied last (the tracing benchmark's sampler).
func NewProvider(ctx context.Context, cfg Config, service, version string, opts ...sdktrace.TracerProviderOption) (*sdktrace.TracerProvider, error) {
	var exp sdktrace.SpanExporter
	var err error
	switch cfg.Exporter {
	case "console":
		exp, err = stdouttrace.New(stdouttrace.WithWriter(os.Stderr))
	default:
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: %s exporter: %w", cfg.Exporter, err)
	}
	attrs := []attribute.KeyValue{semconv.ServiceName(service)}
	if version != "" {
		attrs = append(attrs, semconv.ServiceVersion(version))
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(attrs...))
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	// The variables win over the app's defaults.
	if env, err := resource.New(ctx, resource.WithFromEnv()); err == nil {
		if merged, err := resource.Merge(res, env); err == nil {
			res = merged
		}
	}
	limits := sdktrace.NewSpanLimits()
	limits.AttributeValueLengthLimit = cfg.AttributeValueLength
	return sdktrace.NewTracerProvider(append([]sdktrace.TracerProviderOption{
		sdktrace.WithBatcher(exp), sdktrace.WithResource(res), sdktrace.WithRawSpanLimits(limits)}, opts...)...), nil
}

// Install makes tp the global tracer provider (tests install one with an
// in-memory exporter) with the W3C propagators, and wraps the default HTTP
// transport so outgoing calls made within a span get client spans and
// carry the trace context.
func Install(tp trace.TracerProvider) {
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(Propagator())
	if _, done := http.DefaultTransport.(*otelhttp.Transport); !done {
		http.DefaultTransport = otelhttp.NewTransport(http.DefaultTransport,
			// Only calls made within a span: a background refresh makes
			// no trace of its own.
			otelhttp.WithFilter(func(r *http.Request) bool {
				return trace.SpanFromContext(r.Context()).SpanContext().IsValid()
			}))
	}
}

// Propagator is the W3C trace context and baggage.
func Propagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// PgxTracer is the pgx tracer for a pool (db.Tracer): a span per query,
// batch, copy, prepare, connect and pool acquire made within a span,
// named by the SQL operation, with the statement's text but never its
// parameters. The connection's details (host, port, database, user) are
// left out: they are the deployment's, the same on every span, and
// computing them per span was most of the tracer's own cost. Call it
// after Setup.
func PgxTracer() pgx.QueryTracer {
	return otelpgx.NewTracer(otelpgx.WithDisableConnectionDetailsInAttributes())
}

// InstrumentRedis adds a span per command (and pipeline) to rdb, with the
// command's name but never its arguments (keys and values hold org ids and
// cached answers). Call it after Setup.
func InstrumentRedis(rdb redis.UniversalClient) error {
	// No caller attributes either: a runtime.Caller walk per command.
	if err := redisotel.InstrumentTracing(rdb, redisotel.WithDBStatement(false), redisotel.WithCallerEnabled(false)); err != nil {
		return errors.Join(errors.New("tracing: redis"), err)
	}
	return nil
}

// ShutdownTimeout is how long an app waits for its last spans to leave.
const ShutdownTimeout = 5 * time.Second
