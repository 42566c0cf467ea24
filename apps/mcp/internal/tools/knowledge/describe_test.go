package knowledge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/agentfleet/orchestrator/packages/errs"
)

// An error the vocabulary does not know is a fault of the server: internal,
// not retryable, answered without its detail, and logged with the operation
// that failed.
func TestDescribeAnswersUnknownErrorsAsInternal(t *testing.T) {
	var err error = fmt.Errorf("scan row 3: %w", errors.New("secret detail: column \"x\" is null"))
	errs.Wrap(&err, "knowledge.Search")

	body, known := Describe(err)
	if known || body.Code != string(errs.CodeInternal) || body.Retryable || body.RetryAfterMs != 0 {
		t.Errorf("unknown error: %+v (known %v), want internal, not retryable", body, known)
	}
	if strings.Contains(body.Text(), "secret") || strings.Contains(body.Text(), "knowledge.Search") {
		t.Errorf("internal answer tells internals: %q", body.Text())
	}

	var logs bytes.Buffer
	logFailure(context.Background(), slog.New(slog.NewJSONHandler(&logs, nil)), "tool failed", err, "tool", ToolSearch)
	if !strings.Contains(logs.String(), `"op":"knowledge.Search"`) || !strings.Contains(logs.String(), "secret detail") {
		t.Errorf("log line lacks the op or the cause: %s", logs.String())
	}

	// A raw error (no service boundary on its way) is internal too.
	if body, _ := Describe(errors.New("boom")); body.Code != string(errs.CodeInternal) {
		t.Errorf("raw error: %+v", body)
	}
	// The vocabulary's codes pass; a deadline stays unavailable.
	if body, known := Describe(errs.InvalidArgument("tags[3]", "must be kebab-case")); !known || body.Code != "invalid_argument" || body.Field != "tags[3]" {
		t.Errorf("invalid argument: %+v", body)
	}
	wrapped := error(context.DeadlineExceeded)
	errs.Wrap(&wrapped, "knowledge.Search")
	if body, _ := Describe(wrapped); body.Code != "unavailable" || !body.Retryable {
		t.Errorf("deadline: %+v", body)
	}
}
