// Package errs is the one error vocabulary of the knowledge system: the
// domain packages (knowledge, tenancy) return *Error values, and only the
// edges (the MCP tools, the operators' CLI) turn them into what their
// audience sees. An error names a stable Code, the argument at fault
// (Field, in the domain's vocabulary), the rule it broke (Message), whether
// the same call may succeed later (Retryable) and the operation that failed
// (Op, for the logs).
//
// An error the vocabulary does not know is a bug, not bad input: Wrap records
// it as CodeInternal with the operation, and an edge answers it without its
// detail and logs it.
//
// The package is a leaf: it imports the standard library only.
package errs

import (
	"errors"
	"fmt"
	"strings"
)

// Code is a stable, transport-neutral error class. The MCP app sends it to
// agents verbatim (docs/mcp.md, "Tool errors"), so never rename one.
type Code string

const (
	CodeInvalidArgument Code = "invalid_argument"
	CodeNotFound        Code = "not_found"
	CodeForbidden       Code = "forbidden"
	CodeConflict        Code = "conflict"
	CodeCycle           Code = "cycle"
	CodeQuotaExceeded   Code = "quota_exceeded"
	CodeUnavailable     Code = "unavailable"
	// CodeRateLimited is answered by the MCP edge, not the domain: the
	// caller's agent or org used up its rate limit (retryable).
	CodeRateLimited Code = "rate_limited"
	// CodeUnauthenticated: a token is missing, malformed, unknown, revoked
	// or expired. The MCP server answers it with HTTP 401, never as a tool
	// error.
	CodeUnauthenticated Code = "unauthenticated"
	// CodeInternal is an error the vocabulary does not know: a bug or an
	// unexpected failure of a dependency. Never retryable; its detail is
	// logged, never sent.
	CodeInternal Code = "internal"
)

// Error is the error of the domain packages.
type Error struct {
	Code Code
	// Field names the argument at fault in the domain's vocabulary (e.g.
	// "tags[3]"); an edge may word it for its audience.
	Field string
	// Message says which rule was broken, for the caller.
	Message string
	// Retryable tells the caller that the same call may succeed later (a
	// concurrent call with the same client token still running, a
	// dependency down).
	Retryable bool
	// Op is the operation that failed, e.g. "knowledge.Store": for the
	// logs, never shown to a caller.
	Op string
	// Err is the cause, for the logs.
	Err error
}

// Error is "field: message"; without a message, the cause's text; without
// either, the code's.
func (e *Error) Error() string {
	var b strings.Builder
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	switch {
	case e.Message != "":
		b.WriteString(e.Message)
	case e.Err != nil:
		b.WriteString(e.Err.Error())
	default:
		b.WriteString(strings.ReplaceAll(string(e.Code), "_", " "))
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, errs.ErrNotFound) and friends match by code: a
// target with neither field nor message matches any *Error of its code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Field == "" && t.Message == "" && t.Code == e.Code
}

// Sentinels for errors.Is; each matches any *Error of its code.
var (
	ErrInvalidArgument = &Error{Code: CodeInvalidArgument}
	ErrNotFound        = &Error{Code: CodeNotFound}
	ErrForbidden       = &Error{Code: CodeForbidden}
	ErrConflict        = &Error{Code: CodeConflict}
	ErrCycle           = &Error{Code: CodeCycle}
	ErrQuotaExceeded   = &Error{Code: CodeQuotaExceeded}
	ErrUnavailable     = &Error{Code: CodeUnavailable}
	ErrUnauthenticated = &Error{Code: CodeUnauthenticated}
	ErrInternal        = &Error{Code: CodeInternal}
)

// InvalidArgument builds the error for a field that broke a rule.
func InvalidArgument(field, format string, args ...any) *Error {
	return &Error{Code: CodeInvalidArgument, Field: field, Message: fmt.Sprintf(format, args...)}
}

// CodeOf returns the code of err: the code of the first *Error in its chain,
// "" for nil, CodeInternal for an error the vocabulary does not know.
func CodeOf(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) && e.Code != "" {
		return e.Code
	}
	return CodeInternal
}

// OpOf returns the operation recorded on the first *Error in err's chain
// that has one, or "".
func OpOf(err error) string {
	for err != nil {
		if e, ok := err.(*Error); ok && e.Op != "" {
			return e.Op
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, inner := range u.Unwrap() {
				if op := OpOf(inner); op != "" {
					return op
				}
			}
			return ""
		default:
			return ""
		}
	}
	return ""
}

// Wrap records, at a service boundary, that op failed with *errp; deferred
// by the exported methods of the domain services:
//
//	func (s *Service) Store(...) (_ *StoreResult, err error) {
//		defer errs.Wrap(&err, "knowledge.Store")
//
// An *Error keeps its code, field and message and gets op unless it has an
// operation already (it failed in a deeper service). Any other error becomes
// CodeInternal, not retryable, wrapping it so that errors.Is and errors.As
// still see the cause; a context's cancellation or deadline too, since only
// the edge that set it knows how to word it.
func Wrap(errp *error, op string) {
	err := *errp
	if err == nil {
		return
	}
	var e *Error
	switch {
	case !errors.As(err, &e):
		*errp = &Error{Code: CodeInternal, Op: op, Err: err}
	case e == err && e.Op == "":
		c := *e // never write to a shared value (a sentinel, a table's)
		c.Op = op
		*errp = &c
	}
}
