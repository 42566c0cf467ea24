package rediskit

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// RedisConfig is a parsed REDIS_URL: one Redis or a Redis Cluster.
//
// The forms (docs/operators.md, "Running on a cluster"):
//
//	redis://[user:password@]host:port[/db]     one Redis (db: logical database, default 0)
//	rediss://...                                the same over TLS
//	redis+cluster://[user:password@]host:port[,host:port...]   a Redis Cluster: any of its
//	                                            nodes as seeds (no database: a cluster has only 0)
//	rediss+cluster://...                        the same over TLS
//
// A comma list of addresses in a plain redis:// URL is taken as a cluster too.
type RedisConfig struct {
	Cluster bool
	Single  *redis.Options        // when !Cluster
	Nodes   *redis.ClusterOptions // when Cluster
}

// ParseRedisURL parses REDIS_URL (see RedisConfig).
func ParseRedisURL(raw string) (RedisConfig, error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return RedisConfig{}, fmt.Errorf("redis url %q: no scheme (redis://, rediss://, redis+cluster://)", Redact(raw))
	}
	cluster := false
	switch scheme {
	case "redis+cluster":
		scheme, cluster = "redis", true
	case "rediss+cluster":
		scheme, cluster = "rediss", true
	}
	hostEnd := strings.IndexAny(rest, "/?")
	hosts := rest
	if hostEnd >= 0 {
		hosts = rest[:hostEnd]
	}
	if at := strings.LastIndex(hosts, "@"); at >= 0 {
		hosts = hosts[at+1:]
	}
	if strings.Contains(hosts, ",") {
		cluster = true
	}
	if !cluster {
		o, err := redis.ParseURL(raw)
		if err != nil {
			return RedisConfig{}, err
		}
		return RedisConfig{Single: o}, nil
	}
	u, err := url.Parse(scheme + "://" + strings.Replace(rest, hosts, "placeholder", 1))
	if err != nil {
		return RedisConfig{}, fmt.Errorf("redis url %q: %w", Redact(raw), err)
	}
	if p := strings.Trim(u.Path, "/"); p != "" && p != "0" {
		return RedisConfig{}, fmt.Errorf("redis url %q: a Redis Cluster has only database 0 (drop /%s)", Redact(raw), p)
	}
	co := &redis.ClusterOptions{}
	for h := range strings.SplitSeq(hosts, ",") {
		if h = strings.TrimSpace(h); h == "" {
			continue
		}
		if !strings.Contains(h, ":") {
			h += ":6379"
		}
		co.Addrs = append(co.Addrs, h)
	}
	if len(co.Addrs) == 0 {
		return RedisConfig{}, fmt.Errorf("redis url %q: no cluster node address", Redact(raw))
	}
	if u.User != nil {
		co.Username = u.User.Username()
		co.Password, _ = u.User.Password()
	}
	if scheme == "rediss" {
		co.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	return RedisConfig{Cluster: true, Nodes: co}, nil
}

func Redact(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
			return u.String()
		}
	}
	return raw
}

// Client is a go-redis client for the config: a *redis.ClusterClient for a
// cluster, a *redis.Client otherwise.
func (c RedisConfig) Client() redis.UniversalClient {
	if c.Cluster {
		return redis.NewClusterClient(c.Nodes)
	}
	return redis.NewClient(c.Single)
}

// Asynq is the asynq connection option for the config
// (RedisClusterClientOpt for a cluster).
func (c RedisConfig) Asynq() asynq.RedisConnOpt {
	if c.Cluster {
		return asynq.RedisClusterClientOpt{Addrs: c.Nodes.Addrs, Username: c.Nodes.Username,
			Password: c.Nodes.Password, TLSConfig: c.Nodes.TLSConfig}
	}
	o := c.Single
	return asynq.RedisClientOpt{Network: o.Network, Addr: o.Addr, Username: o.Username, Password: o.Password,
		DB: o.DB, TLSConfig: o.TLSConfig, DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout,
		WriteTimeout: o.WriteTimeout, PoolSize: o.PoolSize}
}

// ScanKeys calls f for every key matching pattern: on every master of a
// cluster (a SCAN reaches one node only), on the one Redis otherwise.
func ScanKeys(ctx context.Context, rdb redis.UniversalClient, pattern string, f func(ctx context.Context, c redis.Cmdable, key string) error) error {
	scan := func(ctx context.Context, c redis.Cmdable) error {
		iter := c.Scan(ctx, 0, pattern, 500).Iterator()
		for iter.Next(ctx) {
			if err := f(ctx, c, iter.Val()); err != nil {
				return err
			}
		}
		return iter.Err()
	}
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
	}
	return scan(ctx, rdb)
}

// WithTimeouts sets the client's dial, read and write timeouts and its
// pool's wait (either form).
func (c RedisConfig) WithTimeouts(dial, read, write, pool time.Duration) RedisConfig {
	if c.Cluster {
		n := *c.Nodes
		n.DialTimeout, n.ReadTimeout, n.WriteTimeout, n.PoolTimeout = dial, read, write, pool
		c.Nodes = &n
		return c
	}
	o := *c.Single
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.PoolTimeout = dial, read, write, pool
	c.Single = &o
	return c
}
