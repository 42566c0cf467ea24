package entries

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/after"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/idem"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
)

// ReplayWindow is how long a store's answer is kept for a retry with the
// same client token (SPEC): a repeat within it is answered as a replay.
const ReplayWindow = 60 * time.Second

// idemAnswerTTL is how long a store's answer is kept in Redis for a retry.
const idemAnswerTTL = ReplayWindow

// fingerprint identifies the normalised arguments of a store call, so the
// same token with other arguments is told apart from a replay.
func fingerprint(a *domain.StoreArgs) string {
	b, _ := json.Marshal(a) // plain data: cannot fail
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// storeIdempotent runs Store with a client token:
//
//  1. it reads the token's record: the one its caller's edge read in a
//     round trip of its own (idem.ReadFrom: the MCP server reads it with
//     the rate limits), else with a GET;
//  2. no record: the store runs, guarded by Postgres' unique (org, agent,
//     client token) key (a concurrent twin's insert waits for the first
//     and is answered with its entry, replayFromDB), and its answer is
//     recorded, kept 60 s;
//  3. a record: another fingerprint is a reused token (invalid_argument on
//     clientToken), "done" is answered as a replay; "running" (a claim of
//     the token another writer of these keys made before storing) is
//     answered from Postgres or as a retryable conflict.
//
// Redis is an accelerator, not the guard: when it fails the call goes on
// against Postgres, whose unique key still allows one entry per token (the
// error is logged).
func (s *Entries) storeIdempotent(ctx context.Context, c domain.Caller, a *domain.StoreArgs) (*domain.StoreResult, error) {
	rdb := s.opts.Redis
	key := idem.Key(c.OrgID, c.AgentID, *a.ClientToken)
	fp := fingerprint(a)
	raw, edge, err := idem.ReadFrom(ctx, key)
	for range 3 {
		if !edge {
			raw, err = rdb.Get(ctx, key).Bytes()
			if errors.Is(err, redis.Nil) {
				raw, err = nil, nil
			}
		}
		edge = false // read again after a void record
		if err != nil {
			return s.storeWithoutRedis(ctx, c, a, err)
		}
		if raw == nil {
			return s.storeAndRemember(ctx, c, a, key, fp)
		}
		var rec idem.Record
		if err := json.Unmarshal(raw, &rec); err != nil || (rec.State == "done" && rec.Result == nil) {
			return s.storeWithoutRedis(ctx, c, a, fmt.Errorf("unreadable idempotence record: %v", err))
		}
		if rec.FP != fp {
			var id uuid.UUID
			if rec.Result != nil {
				id = rec.Result.ID
			}
			return nil, tokenReused(id)
		}
		if rec.State != "done" {
			return s.whileRunning(ctx, c, a)
		}
		res, err := s.replayable(ctx, c, rec.Result)
		if err != nil {
			return s.storeWithoutRedis(ctx, c, a, err)
		}
		if res == nil {
			// The entry the store made is erased (forgotten or purged):
			// the record is void. Postgres answers (store, replayFromDB):
			// a forgotten entry's token is refused, a purged one's stores
			// anew.
			if err := rdb.Del(ctx, key).Err(); err != nil {
				return s.storeWithoutRedis(ctx, c, a, err)
			}
			continue
		}
		return res, nil
	}
	return s.store(ctx, c, a)
}

// replayable is a recorded answer as a replay may give it now: nothing
// erased in it. The record was written when the store ran, and a forget or
// purge since may have erased the entry it made or entries of its similar
// list (whose titles it holds). Forget and purge delete the records naming
// what they erase, but a store that records its answer after their scan of
// the keys escapes it; checking at replay time against the rows that exist
// is what makes "a retried store is not answered with a forgotten id" hold
// under any interleaving: an erasure commits before it returns, so a replay
// after it never sees the rows. nil: the entry the store made is gone.
func (s *Entries) replayable(ctx context.Context, c domain.Caller, rec *domain.StoreResult) (*domain.StoreResult, error) {
	ids := make([]uuid.UUID, 0, 1+len(rec.Similar))
	ids = append(ids, rec.ID)
	for _, x := range rec.Similar {
		ids = append(ids, x.ID)
	}
	have, err := s.q.ExistingAmong(ctx, sqlc.ExistingAmongParams{OrgID: c.OrgID, Ids: ids})
	if err != nil {
		return nil, err
	}
	exists := make(map[uuid.UUID]bool, len(have))
	for _, id := range have {
		exists[id] = true
	}
	if !exists[rec.ID] {
		return nil, nil
	}
	res := *rec
	res.Replayed = true
	res.Similar = make([]domain.Similar, 0, len(rec.Similar))
	for _, x := range rec.Similar {
		if exists[x.ID] {
			res.Similar = append(res.Similar, x)
		}
	}
	return &res, nil
}

// whileRunning answers a store whose token's record is a "running"
// marker (a claim of the token another writer of these keys made). A
// committed entry of the token is the answer (replayed from Postgres): the
// marker may be one the call that stored could not replace with its
// answer. Otherwise that call is still running, or died before
// committing: a retryable conflict, until the marker expires.
func (s *Entries) whileRunning(ctx context.Context, c domain.Caller, a *domain.StoreArgs) (*domain.StoreResult, error) {
	res, err := s.replayFromDB(ctx, c, a)
	if err == nil || !errors.Is(err, pgx.ErrNoRows) {
		return res, err
	}
	return nil, &errs.Error{Code: errs.CodeConflict, Field: "clientToken", Retryable: true,
		Message: "a call with this clientToken is still running; retry in a moment to get its answer"}
}

func (s *Entries) storeWithoutRedis(ctx context.Context, c domain.Caller, a *domain.StoreArgs, cause error) (*domain.StoreResult, error) {
	s.log().Warn("knowledge: idempotence key unavailable; relying on Postgres' unique client token",
		"org", c.OrgID, "agent", c.AgentID, "err", cause)
	return s.store(ctx, c, a)
}

// storeAndRemember stores and records the answer for the token's retries.
func (s *Entries) storeAndRemember(ctx context.Context, c domain.Caller, a *domain.StoreArgs, key, fp string) (*domain.StoreResult, error) {
	res, err := s.store(ctx, c, a)
	if err != nil {
		return nil, err
	}
	first := *res
	first.Replayed = false
	val, _ := json.Marshal(idem.Record{State: "done", FP: fp, Result: &first})
	// After the answer when the caller's edge runs such work (the MCP
	// server), and even if the caller gives up now. A retry that comes
	// before the record is answered from Postgres, with the same entry.
	after.Run(ctx, func(ctx context.Context) {
		if err := s.opts.Redis.Set(ctx, key, val, idemAnswerTTL).Err(); err != nil {
			s.log().Warn("knowledge: could not record idempotent answer; Postgres still guards the token", "key", key, "err", err)
		}
	})
	return res, nil
}
