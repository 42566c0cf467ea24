package main

import (
	"context"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/knowledge"
)

// Coverage is the full-text list's reach: of the queries that share at
// least one non-stop word (after the org's analysis: stop words dropped,
// stemmed) with the corpus, how many the full-text list answers. The issue
// asks for at least 95%; by construction (any shared term matches) it
// should be all of them, so a miss points at a bug, not a ranking choice.
type Coverage struct {
	SharingAWord int     `json:"queriesSharingAWord"`
	Answered     int     `json:"answeredByFullText"`
	Share        float64 `json:"share"`
}

// coverage measures Coverage from the queries and the full-text lists the
// main scoring already has (lists[i] belongs to queries[i]).
func coverage(ctx context.Context, svc *knowledge.Service, org uuid.UUID, queries []Query, lists []docLists) (Coverage, error) {
	var c Coverage
	for i, q := range queries {
		shares, err := knowledge.SharesAWord(ctx, svc, org, queryText(q.Text))
		if err != nil {
			return c, err
		}
		if !shares {
			continue
		}
		c.SharingAWord++
		if len(lists[i].FullText) > 0 {
			c.Answered++
		}
	}
	if c.SharingAWord > 0 {
		c.Share = float64(c.Answered) / float64(c.SharingAWord)
	}
	return c, nil
}
