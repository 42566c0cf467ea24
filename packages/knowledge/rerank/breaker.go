package rerank

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	"github.com/sony/gobreaker/v2"
)

// The breaker's defaults (BreakerSettings).
const (
	// BreakerFailures failures in a row open the breaker: a provider down
	// costs that many searches their budget, then none.
	BreakerFailures = 5
	// BreakerOpenFor is how long an open breaker refuses calls; then one
	// call tries the provider again (half-open) and closes it on success.
	BreakerOpenFor = 30 * time.Second
)

// BreakerSettings tune a Client's breaker; zero values are the defaults.
type BreakerSettings struct {
	Failures int
	OpenFor  time.Duration
}

// Client is a Reranker behind a circuit breaker: after Failures failed
// calls in a row (an error, or no answer before the caller's deadline) it
// answers ErrBreakerOpen at once for OpenFor, without calling the
// provider, then lets one call through to try it again. A call the caller
// cancelled (context.Canceled) counts neither way.
type Client struct {
	r  Reranker
	cb *gobreaker.CircuitBreaker[[]Result]
}

// NewClient puts r behind a breaker.
func NewClient(r Reranker, s BreakerSettings) *Client {
	failures := uint32(cmp.Or(s.Failures, BreakerFailures))
	return &Client{r: r, cb: gobreaker.NewCircuitBreaker[[]Result](gobreaker.Settings{
		Name:        "rerank " + r.Model(),
		MaxRequests: 1,
		Timeout:     cmp.Or(s.OpenFor, BreakerOpenFor),
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= failures },
		IsExcluded:  func(err error) bool { return errors.Is(err, context.Canceled) },
	})}
}

func (c *Client) Model() string { return c.r.Model() }

// Rerank calls the provider unless the breaker is open (ErrBreakerOpen;
// also while a half-open probe is in flight).
func (c *Client) Rerank(ctx context.Context, query string, docs []string) ([]Result, error) {
	rs, err := c.cb.Execute(func() ([]Result, error) { return c.r.Rerank(ctx, query, docs) })
	if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
		return nil, ErrBreakerOpen
	}
	return rs, err
}

// Open says whether the breaker refuses calls now.
func (c *Client) Open() bool { return c.cb.State() == gobreaker.StateOpen }

// sortResults orders results best first, ties by index.
func sortResults(rs []Result) {
	slices.SortFunc(rs, func(a, b Result) int {
		if a.Score != b.Score {
			if a.Score > b.Score {
				return -1
			}
			return 1
		}
		return a.Index - b.Index
	})
}
