package rediskit_test

import (
	"testing"

	"github.com/hibiken/asynq"

	"github.com/agentfleet/orchestrator/packages/knowledge/internal/rediskit"
)

func TestParseRedisURL(t *testing.T) {
	c, err := rediskit.ParseRedisURL("redis://127.0.0.1:6379/3")
	if err != nil || c.Cluster || c.Single.Addr != "127.0.0.1:6379" || c.Single.DB != 3 {
		t.Fatalf("single: %+v %v", c, err)
	}
	if o, ok := c.Asynq().(asynq.RedisClientOpt); !ok || o.DB != 3 || o.Addr != "127.0.0.1:6379" {
		t.Fatalf("single asynq: %#v", c.Asynq())
	}
	for _, u := range []string{
		"redis+cluster://u:secret@10.0.0.1:7001,10.0.0.2:7002,10.0.0.3",
		"redis://u:secret@10.0.0.1:7001,10.0.0.2:7002,10.0.0.3/0",
	} {
		c, err := rediskit.ParseRedisURL(u)
		if err != nil || !c.Cluster {
			t.Fatalf("%s: %+v %v", u, c, err)
		}
		if got := c.Nodes.Addrs; len(got) != 3 || got[0] != "10.0.0.1:7001" || got[2] != "10.0.0.3:6379" {
			t.Fatalf("%s: addrs %v", u, got)
		}
		if c.Nodes.Username != "u" || c.Nodes.Password != "secret" || c.Nodes.TLSConfig != nil {
			t.Fatalf("%s: auth %+v", u, c.Nodes)
		}
		if o, ok := c.Asynq().(asynq.RedisClusterClientOpt); !ok || len(o.Addrs) != 3 || o.Password != "secret" {
			t.Fatalf("%s: asynq %#v", u, c.Asynq())
		}
	}
	if c, err := rediskit.ParseRedisURL("rediss+cluster://h:1"); err != nil || !c.Cluster || c.Nodes.TLSConfig == nil {
		t.Fatalf("tls cluster: %+v %v", c, err)
	}
	for _, bad := range []string{"redis+cluster://h:1,h:2/2", "127.0.0.1:6379", "redis+cluster:///"} {
		if _, err := rediskit.ParseRedisURL(bad); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}
