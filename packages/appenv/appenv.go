// Package appenv is the one way the apps read their configuration and set
// up their logging. Every setting is an environment variable with a working
// default; a bad value is an error naming the variable, the value and the
// rule, and all of a process's bad values are reported together, so an
// operator fixes them in one go instead of one restart each.
//
// The apps take getenv as a function (os.Getenv in main, a map in tests),
// so a test never touches the process environment.
package appenv

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"
)

// Env reads variables through getenv and collects what is wrong with them.
type Env struct {
	getenv func(string) string
	errs   []error
}

// Vars is a getenv over name, value pairs: the environment of a test.
func Vars(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

// New returns an Env reading through getenv.
func New(getenv func(string) string) *Env { return &Env{getenv: getenv} }

// Raw is the variable's value as set, untrimmed (a secret, or whether a
// variable is set at all).
func (e *Env) Raw(name string) string { return e.getenv(name) }

// Fail records that name's value breaks rule. A variable read twice (a
// setting the next model inherits, knowledgeenv.Next) is reported once.
func (e *Env) Fail(name, rule string) {
	e.Add(fmt.Errorf("%s=%q: %s", name, e.getenv(name), rule))
}

// Add records an error that already names its variable.
func (e *Env) Add(err error) {
	if err == nil {
		return
	}
	for _, seen := range e.errs {
		if seen.Error() == err.Error() {
			return
		}
	}
	e.errs = append(e.errs, err)
}

// Err is every failure recorded, or nil.
func (e *Env) Err() error { return errors.Join(e.errs...) }

// String is the trimmed value, or def when it is empty.
func (e *Env) String(name, def string) string {
	if v := strings.TrimSpace(e.getenv(name)); v != "" {
		return v
	}
	return def
}

// OneOf is String limited to the values allowed (the first is named in the
// rule as the default).
func (e *Env) OneOf(name, def string, allowed ...string) string {
	v := e.String(name, def)
	for _, a := range allowed {
		if v == a {
			return v
		}
	}
	e.Fail(name, "must be one of "+strings.Join(allowed, ", "))
	return def
}

// Int is the value as an integer in [lo, hi], or def when unset.
func (e *Env) Int(name string, def, lo, hi int) int {
	v := strings.TrimSpace(e.getenv(name))
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		e.Fail(name, fmt.Sprintf("must be an integer from %d to %d", lo, hi))
		return def
	}
	return n
}

// Duration is the value as a Go duration ("500ms", "30s") in [lo, hi] (hi
// 0: no upper bound), or def when unset.
func (e *Env) Duration(name string, def, lo, hi time.Duration) time.Duration {
	v := strings.TrimSpace(e.getenv(name))
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < lo || (hi > 0 && d > hi) {
		rule := fmt.Sprintf("must be a duration of at least %s, such as 5s", lo)
		if hi > 0 {
			rule = fmt.Sprintf("must be a duration from %s to %s, such as 5s", lo, hi)
		}
		e.Fail(name, rule)
		return def
	}
	return d
}

// Bool is the value as true or false (strconv.ParseBool), or def when unset.
func (e *Env) Bool(name string, def bool) bool {
	v := strings.TrimSpace(e.getenv(name))
	if v == "" {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		e.Fail(name, "must be true or false")
		return def
	}
	return b
}

// Logging variables, the same for every app.
const (
	EnvLogLevel  = "LOG_LEVEL"  // debug, info (default), warn, error
	EnvLogFormat = "LOG_FORMAT" // json (default) or text
)

// Logger is the app's logger: LOG_LEVEL and LOG_FORMAT (each overridden by
// the app's own prefixed variable when set, e.g. MCP_LOG_LEVEL, so an
// operator can turn one app's level up), records to w tagged app=name.
func (e *Env) Logger(app, prefix string, w io.Writer) *slog.Logger {
	level, format := EnvLogLevel, EnvLogFormat
	if prefix != "" && strings.TrimSpace(e.getenv(prefix+EnvLogLevel)) != "" {
		level = prefix + EnvLogLevel
	}
	if prefix != "" && strings.TrimSpace(e.getenv(prefix+EnvLogFormat)) != "" {
		format = prefix + EnvLogFormat
	}
	var lvl slog.Level
	if v := e.String(level, "info"); lvl.UnmarshalText([]byte(v)) != nil {
		e.Fail(level, "must be debug, info, warn or error")
	}
	opts := &slog.HandlerOptions{Level: lvl}
	var h slog.Handler = slog.NewJSONHandler(w, opts)
	if e.OneOf(format, "json", "json", "text") == "text" {
		h = slog.NewTextHandler(w, opts)
	}
	return slog.New(h).With("app", app)
}
