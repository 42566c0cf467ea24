package testenv

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentfleet/orchestrator/db"
)

// DefaultRedisURL is used when TEST_REDIS_URL is unset.
const DefaultRedisURL = db.DefaultRedisURL

// leaseTTL bounds how long a crashed test binary can hold a database.
const leaseTTL = 10 * time.Minute

// RedisURL is the base URL tests lease Redis databases from.
func RedisURL() string {
	if u := os.Getenv("TEST_REDIS_URL"); u != "" {
		return u
	}
	return DefaultRedisURL
}

// Redis is a leased, empty Redis logical database for one test.
type Redis struct {
	DB      int
	URL     string
	Options *redis.Options
	Client  *redis.Client
}

// LeaseRedis leases one of the logical databases 1..15 (0 is left to
// development), flushes it, and gives it back when t ends. Whole databases
// keep asynq queues and idempotence keys of parallel tests apart. When all
// are taken it waits for one to come free.
func LeaseRedis(t testing.TB) *Redis {
	t.Helper()
	base, err := redis.ParseURL(RedisURL())
	if err != nil {
		t.Fatalf("testenv: TEST_REDIS_URL: %v", err)
	}
	ctrlOpts := *base
	ctrlOpts.DB = 0
	ctrl := redis.NewClient(&ctrlOpts)
	defer ctrl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := ctrl.Ping(ctx).Err(); err != nil {
		t.Fatalf("testenv: cannot reach Redis at %s (run `go tool task setup`): %v", RedisURL(), err)
	}
	owner := randomHex(8)
	for {
		for n := 1; n <= 15; n++ {
			key := "testenv:lease:" + strconv.Itoa(n)
			ok, err := ctrl.SetNX(ctx, key, owner, leaseTTL).Result()
			if err != nil {
				t.Fatalf("testenv: lease redis db: %v", err)
			}
			if !ok {
				continue
			}
			opts := *base
			opts.DB = n
			client := redis.NewClient(&opts)
			if err := client.FlushDB(ctx).Err(); err != nil {
				t.Fatalf("testenv: flush redis db %d: %v", n, err)
			}
			t.Cleanup(func() {
				client.FlushDB(context.Background())
				client.Close()
				c := redis.NewClient(&ctrlOpts)
				defer c.Close()
				// Release only our own lease.
				if v, _ := c.Get(context.Background(), key).Result(); v == owner {
					c.Del(context.Background(), key)
				}
			})
			u := fmt.Sprintf("redis://%s/%d", opts.Addr, n)
			if opts.Password != "" {
				u = fmt.Sprintf("redis://:%s@%s/%d", opts.Password, opts.Addr, n)
			}
			return &Redis{DB: n, URL: u, Options: &opts, Client: client}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("testenv: no free Redis database within 5 minutes")
		case <-time.After(100 * time.Millisecond):
		}
	}
}
