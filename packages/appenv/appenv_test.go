package appenv

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

var env = Vars

func TestDefaultsValuesAndEveryErrorNamed(t *testing.T) {
	e := New(env("A", " x ", "N", "7", "D", "2s", "B", "true"))
	if e.String("A", "d") != "x" || e.String("UNSET", "d") != "d" || e.Int("N", 1, 0, 10) != 7 ||
		e.Duration("D", time.Second, time.Millisecond, time.Minute) != 2*time.Second || !e.Bool("B", false) ||
		e.Int("UNSET", 3, 0, 10) != 3 || e.OneOf("UNSET", "json", "json", "text") != "json" {
		t.Fatal("values or defaults wrong")
	}
	if e.Err() != nil {
		t.Fatal(e.Err())
	}
	bad := New(env("N", "70", "D", "2h", "B", "maybe", "F", "xml", "M", "x1"))
	bad.Int("N", 1, 0, 10)
	bad.Duration("D", time.Second, time.Millisecond, time.Minute)
	bad.Bool("B", false)
	bad.OneOf("F", "json", "json", "text")
	bad.Int("M", 1, 0, 10)
	err := bad.Err()
	for _, want := range []string{`N="70": must be an integer from 0 to 10`, `D="2h": must be a duration from 1ms to 1m0s`,
		`B="maybe": must be true or false`, `F="xml": must be one of json, text`, `M="x1"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want %q in %v", want, err)
		}
	}
}

func TestLoggerLevelFormatAndAppOverride(t *testing.T) {
	var buf bytes.Buffer
	e := New(env("LOG_LEVEL", "warn", "LOG_FORMAT", "text", "MCP_LOG_LEVEL", "debug"))
	l := e.Logger("worker", "", &buf)
	l.Info("hidden")
	l.Warn("shown")
	if e.Err() != nil || strings.Contains(buf.String(), "hidden") || !strings.Contains(buf.String(), "msg=shown app=worker") {
		t.Fatalf("%v %q", e.Err(), buf.String())
	}
	buf.Reset()
	l = e.Logger("mcp", "MCP_", &buf) // its own level wins; the shared format stays
	l.Debug("dbg")
	if !strings.Contains(buf.String(), "msg=dbg app=mcp") {
		t.Fatalf("%q", buf.String())
	}
	bad := New(env("LOG_LEVEL", "loud", "LOG_FORMAT", "xml"))
	bad.Logger("x", "", &buf)
	if err := bad.Err(); err == nil || !strings.Contains(err.Error(), "LOG_LEVEL") || !strings.Contains(err.Error(), "LOG_FORMAT") {
		t.Fatalf("want both named: %v", err)
	}
}
