package knowledge

import (
	"errors"
	"fmt"
)

// Code is a stable, transport-neutral error class. The MCP app sends it to
// agents verbatim, so never rename one.
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
)

// Error is the application error of the package. Field names the argument at
// fault in the caller's vocabulary (the MCP argument name, e.g. "tags[3]"),
// Message says which rule it broke.
type Error struct {
	Code    Code
	Field   string
	Message string
	// Retryable tells the caller that the same call may succeed later
	// (a concurrent call with the same client token still running, a
	// dependency down).
	Retryable bool
	Err       error
}

func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s: %s", e.Field, e.Message)
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, knowledge.ErrNotFound) and friends match by code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Field == "" && t.Message == "" && t.Code == e.Code
}

// Sentinels for errors.Is; they match any *Error with the same code.
var (
	ErrInvalidArgument = &Error{Code: CodeInvalidArgument}
	ErrNotFound        = &Error{Code: CodeNotFound}
	ErrForbidden       = &Error{Code: CodeForbidden}
	ErrConflict        = &Error{Code: CodeConflict}
	ErrCycle           = &Error{Code: CodeCycle}
	ErrQuotaExceeded   = &Error{Code: CodeQuotaExceeded}
	ErrUnavailable     = &Error{Code: CodeUnavailable}
)

// InvalidArgument builds the error for a field that broke a rule.
func InvalidArgument(field, format string, args ...any) *Error {
	return &Error{Code: CodeInvalidArgument, Field: field, Message: fmt.Sprintf(format, args...)}
}

// CodeOf returns the code of err, or "" for an error of another kind.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}
