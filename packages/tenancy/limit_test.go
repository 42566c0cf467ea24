package tenancy_test

import (
	"testing"

	"github.com/agentfleet/orchestrator/packages/tenancy"
)

// Every limit an operator sets is read by one rule: a whole number, or
// unlimited (or -1) for none; the range is the caller's.
func TestParseLimit(t *testing.T) {
	t.Parallel()
	n := func(v int64) *int64 { return &v }
	for _, tc := range []struct {
		in   string
		want *int64
		ok   bool
	}{
		{"unlimited", nil, true},
		{"-1", nil, true},
		{"0", n(0), true},
		{"60", n(60), true},
		{"1000000", n(1_000_000), true},
		{"9223372036854775807", n(1<<63 - 1), true},
		{"-5", n(-5), true}, // a number: its caller's range refuses it
		{"", nil, false},
		{"lots", nil, false},
		{"Unlimited", nil, false},
		{"1.5", nil, false},
		{" 5", nil, false},
		{"9223372036854775808", nil, false},
	} {
		got, ok := tenancy.ParseLimit(tc.in)
		if ok != tc.ok || (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want) {
			t.Errorf("ParseLimit(%q) = %v, %v; want %v, %v", tc.in, deref(got), ok, deref(tc.want), tc.ok)
		}
	}
}

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}
