package idem

import (
	"context"
	"encoding/json"

	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/rediskit"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// Record is the value of an idempotence key.
type Record struct {
	State  string              `json:"state"` // "running" or "done"
	FP     string              `json:"fp"`    // fingerprint of the normalised arguments
	Owner  string              `json:"owner,omitempty"`
	Result *domain.StoreResult `json:"result,omitempty"`
}

// Names says whether the recorded answer names one of ids: as the entry
// the store made (or skipped to) or in its similar list.
func (r *Record) Names(ids map[uuid.UUID]bool) bool {
	if r.Result == nil {
		return false
	}
	if ids[r.Result.ID] {
		return true
	}
	for _, x := range r.Result.Similar {
		if ids[x.ID] {
			return true
		}
	}
	return false
}

// Key is the Redis key of a store's client token:
// Prefix(org, agent) and the token.
func Key(org, agent, token uuid.UUID) string {
	return Prefix(org, agent) + token.String()
}

// Prefix is the prefix of the store idempotence keys of org's agent,
// or of all of org's with agent uuid.Nil: a purge and an erasure scan them.
func Prefix(org, agent uuid.UUID) string {
	if agent == uuid.Nil {
		return "idem:k.store:" + org.String() + ":"
	}
	return "idem:k.store:" + org.String() + ":" + agent.String() + ":"
}

type readKey struct{}

// read is a record read by the caller's edge.
type read struct {
	key   string
	value []byte
	err   error
}

// WithRead returns ctx carrying what the caller's edge read at key in a
// round trip of its own (the MCP server's, with the rate limits): value,
// nil when there is no such key, or err when Redis could not answer. The
// store then does not read it again.
func WithRead(ctx context.Context, key string, value []byte, err error) context.Context {
	return context.WithValue(ctx, readKey{}, read{key, value, err})
}

// ReadFrom is what WithRead put in ctx for key; ok is false when nothing
// was read for it.
func ReadFrom(ctx context.Context, key string) (value []byte, ok bool, err error) {
	r, ok := ctx.Value(readKey{}).(read)
	if !ok || r.key != key {
		return nil, false, nil
	}
	return r.value, true, r.err
}

// ForgetNaming deletes the org's store idempotence records
// that name an entry of ids (as the entry made or in the similar list), so
// Redis holds no title of an erased entry. Best effort: replays check what
// they answer anyway (replayable). It returns how many it deleted.
func ForgetNaming(ctx context.Context, rdb redis.UniversalClient, org uuid.UUID, ids map[uuid.UUID]bool) (int64, error) {
	if rdb == nil {
		return 0, nil
	}
	var n int64
	err := rediskit.ScanKeys(ctx, rdb, Prefix(org, uuid.Nil)+"*", func(ctx context.Context, c redis.Cmdable, key string) error {
		v, err := c.Get(ctx, key).Bytes()
		if err != nil {
			return nil // expired meanwhile
		}
		var rec Record
		if json.Unmarshal(v, &rec) != nil || !rec.Names(ids) {
			return nil
		}
		if err := c.Del(ctx, key).Err(); err != nil {
			return err
		}
		n++
		return nil
	})
	return n, err
}
