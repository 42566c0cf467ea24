package server

import (
	"context"
	"log/slog"
)

// sdkLogHandler is the handler of the go-sdk's own logger. The SDK logs
// session life at INFO ("server connecting", "server session connected",
// "server session disconnected", ...): in stateless mode every HTTP request
// is a throwaway session, so that was three INFO lines a request, 858 of
// about 1,000 lines in a short trial against 127 tool call lines. Those
// go to DEBUG here, and the server's own "tool call" line stays the one
// INFO line of a call. A client's protocol mistake (a method its protocol
// version removed, such as ping under 2026-07-28; an initialize out of
// order) is answered with a JSON-RPC error the client sees; the SDK logs it
// at ERROR, which would page an operator for a client's bug: it goes to
// WARN. Everything else the SDK logs keeps its level. Every line is tagged
// component=go-sdk.
type sdkLogHandler struct {
	inner slog.Handler
}

// clientMistakes are the SDK's ERROR messages that report a request the
// client got wrong, not a fault of the server.
var clientMistakes = map[string]bool{
	"method removed in the new protocol":   true,
	"method invalid during initialization": true,
	"initialized before initialize":        true,
	"duplicate initialized notification":   true,
	"duplicate initialize request":         true,
}

// newSDKLogger wraps l for the go-sdk.
func newSDKLogger(l *slog.Logger) *slog.Logger {
	return slog.New(sdkLogHandler{inner: l.Handler()}).With("component", "go-sdk")
}

func (h sdkLogHandler) level(l slog.Level, msg string) slog.Level {
	switch {
	case l == slog.LevelInfo:
		return slog.LevelDebug
	case l == slog.LevelError && (msg == "" || clientMistakes[msg]):
		// msg "": Enabled is asked before the message is known; a
		// mistake's WARN must not be dropped by a level of ERROR only
		// being enabled, so ask for the lower of the two.
		return slog.LevelWarn
	}
	return l
}

func (h sdkLogHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, h.level(l, ""))
}

func (h sdkLogHandler) Handle(ctx context.Context, r slog.Record) error {
	r.Level = h.level(r.Level, r.Message)
	if !h.inner.Enabled(ctx, r.Level) {
		return nil
	}
	return h.inner.Handle(ctx, r)
}

func (h sdkLogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return sdkLogHandler{inner: h.inner.WithAttrs(as)}
}

func (h sdkLogHandler) WithGroup(name string) slog.Handler {
	return sdkLogHandler{inner: h.inner.WithGroup(name)}
}
