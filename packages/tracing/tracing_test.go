package tracing

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"

	"github.com/agentfleet/orchestrator/packages/appenv"
)

func TestReadConfig(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		vars []string
		want string
	}{
		{nil, ""}, // off by default
		{[]string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"}, "otlp"},
		{[]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://collector:4318/v1/traces"}, "otlp"},
		{[]string{"OTEL_TRACES_EXPORTER", "otlp"}, "otlp"},
		{[]string{"OTEL_TRACES_EXPORTER", "console"}, "console"},
		{[]string{"OTEL_TRACES_EXPORTER", "none", "OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"}, ""},
		{[]string{"OTEL_SDK_DISABLED", "true", "OTEL_TRACES_EXPORTER", "otlp"}, ""},
	} {
		e := appenv.New(appenv.Vars(c.vars...))
		got := ReadConfig(e)
		if err := e.Err(); err != nil || got.Exporter != c.want {
			t.Errorf("%v: exporter %q err %v, want %q", c.vars, got.Exporter, err, c.want)
		}
	}
	e := appenv.New(appenv.Vars())
	if c := ReadConfig(e); c.AttributeValueLength != DefaultAttributeValueLength {
		t.Errorf("attribute value length %d, want %d by default", c.AttributeValueLength, DefaultAttributeValueLength)
	}
	e = appenv.New(appenv.Vars("OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", "-1"))
	if c := ReadConfig(e); c.AttributeValueLength != -1 || e.Err() != nil {
		t.Errorf("attribute value length %d (%v), want -1 (unlimited)", c.AttributeValueLength, e.Err())
	}
	for _, bad := range [][]string{
		{"OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", "short"},
		{"OTEL_TRACES_EXPORTER", "jaeger"},
		{"OTEL_EXPORTER_OTLP_PROTOCOL", "grpc", "OTEL_TRACES_EXPORTER", "otlp"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "127.0.0.1:4318"},
		{"OTEL_SDK_DISABLED", "maybe"},
	} {
		e := appenv.New(appenv.Vars(bad...))
		ReadConfig(e)
		if err := e.Err(); err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("%v: %v, want an error naming %s", bad, err, bad[0])
		}
	}
}

func TestSetup(t *testing.T) {
	ctx := context.Background()
	// Off: nothing installed, spans are the API's no-op.
	stop, err := Setup(ctx, Config{}, "test", "")
	if err != nil {
		t.Fatal(err)
	}
	stop(ctx)
	if _, span := otel.Tracer("t").Start(ctx, "x"); span.IsRecording() {
		t.Error("a span records with tracing off")
	}
	if _, wrapped := http.DefaultTransport.(*otelhttp.Transport); wrapped {
		t.Error("the default transport is wrapped with tracing off")
	}
	// On (console exporter, to stderr): spans record, HTTP is wrapped.
	stop, err = Setup(ctx, Config{Exporter: "console", AttributeValueLength: DefaultAttributeValueLength}, "test", "v1")
	if err != nil {
		t.Fatal(err)
	}
	defer stop(ctx)
	_, span := otel.Tracer("t").Start(ctx, "x")
	if !span.IsRecording() {
		t.Error("a span does not record with tracing on")
	}
	span.End()
	if _, wrapped := http.DefaultTransport.(*otelhttp.Transport); !wrapped {
		t.Error("the default transport is not wrapped with tracing on")
	}
}
