package tenancy

import "strconv"

// Unlimited is how an operator writes "no limit" for any limit: a quota
// (ctl quota set --knowledge-stored), a rate limit (ctl ratelimit set
// --per-minute) or a server default (MCP_RATE_*). In the domain it is the
// nil limit (Quota.Limit, RateLimit.PerMinute).
const Unlimited = "unlimited"

// ParseLimit reads a limit as an operator writes it: a whole number, or
// Unlimited (nil). -1 is taken for Unlimited as well, wherever a limit is
// read: quotas have always accepted it, and one rule for every limit keeps
// a value that works for one flag working for the others.
//
// It lives here rather than in appenv because a limit and its nil are the
// domain's notion, read from ctl flags as much as from the environment.
// The range is the limit's own and stays with its caller (a quota is 0 or
// more, a rate 1 to MaxRatePerMinute): ok is false only for a value that
// is neither a whole number nor unlimited, and each caller names its flag
// or variable in its refusal.
func ParseLimit(s string) (limit *int64, ok bool) {
	if s == Unlimited || s == "-1" {
		return nil, true
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return nil, false
	}
	return &n, true
}
