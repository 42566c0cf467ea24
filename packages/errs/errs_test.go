package errs_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/agentfleet/orchestrator/packages/errs"
)

func TestErrorText(t *testing.T) {
	for _, tc := range []struct {
		err  *errs.Error
		want string
	}{
		{errs.InvalidArgument("tags[3]", "must be kebab-case (got %q)", "A B"), `tags[3]: must be kebab-case (got "A B")`},
		{&errs.Error{Code: errs.CodeNotFound, Message: "org x: not found"}, "org x: not found"},
		{&errs.Error{Code: errs.CodeInternal, Err: errors.New("boom")}, "boom"},
		{errs.ErrQuotaExceeded, "quota exceeded"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
}

func TestIsMatchesByCode(t *testing.T) {
	err := fmt.Errorf("context: %w", &errs.Error{Code: errs.CodeNotFound, Field: "id", Message: "no such entry"})
	if !errors.Is(err, errs.ErrNotFound) {
		t.Error("a not_found error is not errs.ErrNotFound")
	}
	if errors.Is(err, errs.ErrConflict) {
		t.Error("a not_found error is errs.ErrConflict")
	}
	// A target with a message is a value, not a sentinel.
	if errors.Is(err, &errs.Error{Code: errs.CodeNotFound, Message: "other"}) {
		t.Error("matched a non-sentinel target")
	}
}

func TestCodeOf(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want errs.Code
	}{
		{nil, ""},
		{errs.ErrCycle, errs.CodeCycle},
		{fmt.Errorf("wrapped: %w", errs.InvalidArgument("x", "bad")), errs.CodeInvalidArgument},
		{errors.New("a bug"), errs.CodeInternal},
	} {
		if got := errs.CodeOf(tc.err); got != tc.want {
			t.Errorf("CodeOf(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

func TestWrap(t *testing.T) {
	wrap := func(err error, op string) error {
		errs.Wrap(&err, op)
		return err
	}
	if wrap(nil, "op") != nil {
		t.Fatal("Wrap made an error of nil")
	}

	// A bug becomes internal, with the op, the cause still visible.
	cause := context.DeadlineExceeded
	err := wrap(fmt.Errorf("query: %w", cause), "knowledge.Search")
	if errs.CodeOf(err) != errs.CodeInternal || errs.OpOf(err) != "knowledge.Search" || !errors.Is(err, cause) {
		t.Errorf("unknown error: code %q op %q, is cause %v", errs.CodeOf(err), errs.OpOf(err), errors.Is(err, cause))
	}
	var e *errs.Error
	if errors.As(err, &e); e.Retryable {
		t.Error("an internal error is retryable")
	}

	// A vocabulary error keeps what it says and gains the op; the shared
	// sentinel is not written to.
	err = wrap(errs.ErrNotFound, "knowledge.Get")
	if !errors.Is(err, errs.ErrNotFound) || errs.OpOf(err) != "knowledge.Get" || errs.ErrNotFound.Op != "" {
		t.Errorf("sentinel: is %v, op %q, sentinel's op %q", errors.Is(err, errs.ErrNotFound), errs.OpOf(err), errs.ErrNotFound.Op)
	}

	// The deepest service's op wins.
	err = wrap(wrap(errs.InvalidArgument("name", "is required"), "tenancy.CreateOrg"), "knowledge.Import")
	if errs.OpOf(err) != "tenancy.CreateOrg" || err.Error() != "name: is required" {
		t.Errorf("nested: op %q, text %q", errs.OpOf(err), err)
	}

	// Text around a vocabulary error is kept.
	err = wrap(fmt.Errorf("entry 3: %w", errs.ErrConflict), "knowledge.Import")
	if err.Error() != "entry 3: conflict" || errs.CodeOf(err) != errs.CodeConflict {
		t.Errorf("wrapped vocabulary error: %q, code %q", err, errs.CodeOf(err))
	}
}

func TestOpOfJoined(t *testing.T) {
	err := errors.Join(errors.New("first"), &errs.Error{Code: errs.CodeInternal, Op: "knowledge.IndexAll"})
	if got := errs.OpOf(err); got != "knowledge.IndexAll" {
		t.Errorf("OpOf(joined) = %q", got)
	}
}
