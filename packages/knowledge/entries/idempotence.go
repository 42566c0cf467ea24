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
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/idem"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
)

// ReplayWindow is how long a store's answer is kept for a retry with the
// same client token (SPEC): a repeat within it is answered as a replay.
const ReplayWindow = 60 * time.Second

// Lifetimes of the idempotence key: the answer's, and the "running"
// marker's, shorter: a marker left by a call that did not record its
// answer (the process died mid-call, or Redis failed after the store)
// makes a retry look for the token's entry in Postgres; one that finds it
// is answered from there, one that does not is refused as "still running"
// for at most this long, and then stores.
const (
	idemAnswerTTL  = ReplayWindow
	idemRunningTTL = 15 * time.Second
)

// releaseScript deletes the running marker only if it is still ours.
var releaseScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v and string.find(v, ARGV[1], 1, true) then return redis.call('DEL', KEYS[1]) end
return 0`)

// fingerprint identifies the normalised arguments of a store call, so the
// same token with other arguments is told apart from a replay.
func fingerprint(a *domain.StoreArgs) string {
	b, _ := json.Marshal(a) // plain data: cannot fail
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// storeIdempotent runs Store under the Redis protocol:
//
//  1. SET NX a "running" marker carrying the fingerprint;
//  2. the winner runs the store, then overwrites the key with its answer
//     (kept 60 s), or deletes its marker if the store failed;
//  3. a loser reads the key: another fingerprint is a reused token
//     (invalid_argument on clientToken), "running" is a retryable conflict,
//     "done" is answered as a replay.
//
// Redis is an accelerator, not the guard: when it fails the call goes on
// against Postgres, whose unique (org, agent, client token) key still
// allows one entry per token (the error is logged).
func (s *Entries) storeIdempotent(ctx context.Context, c domain.Caller, a *domain.StoreArgs) (*domain.StoreResult, error) {
	rdb := s.opts.Redis
	key := idem.Key(c.OrgID, c.AgentID, *a.ClientToken)
	fp := fingerprint(a)
	owner := uuid.NewString()
	marker, _ := json.Marshal(idem.Record{State: "running", FP: fp, Owner: owner})
	for range 3 {
		ok, err := rdb.SetNX(ctx, key, marker, idemRunningTTL).Result()
		if err != nil {
			return s.storeWithoutRedis(ctx, c, a, err)
		}
		if ok {
			return s.storeAndRemember(ctx, c, a, key, fp, owner)
		}
		raw, err := rdb.Get(ctx, key).Bytes()
		if errors.Is(err, redis.Nil) {
			continue // expired between SETNX and GET: try again
		}
		if err != nil {
			return s.storeWithoutRedis(ctx, c, a, err)
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

// whileRunning answers a store whose token's key says another call with
// the same arguments is running. A committed entry of the token is the
// answer (replayed from Postgres): the marker may be one the call that
// stored could not replace with its answer (Redis failing then, as when a
// Redis Cluster master is down, or the process dying after the commit).
// Otherwise that call is still running, or died before committing: a
// retryable conflict, until the marker expires.
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

func (s *Entries) storeAndRemember(ctx context.Context, c domain.Caller, a *domain.StoreArgs, key, fp, owner string) (*domain.StoreResult, error) {
	rdb := s.opts.Redis
	// The key must be settled even if the caller gives up now.
	bg := context.WithoutCancel(ctx)
	res, err := s.store(ctx, c, a)
	if err != nil {
		if rerr := releaseScript.Run(bg, rdb, []string{key}, owner).Err(); rerr != nil {
			s.log().Warn("knowledge: could not release idempotence key", "key", key, "err", rerr)
		}
		return nil, err
	}
	first := *res
	first.Replayed = false
	val, _ := json.Marshal(idem.Record{State: "done", FP: fp, Result: &first})
	if err := rdb.Set(bg, key, val, idemAnswerTTL).Err(); err != nil {
		s.log().Warn("knowledge: could not record idempotent answer; Postgres still guards the token", "key", key, "err", err)
	}
	return res, nil
}
