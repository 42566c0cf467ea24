package main

import (
	"context"
	"io"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentfleet/orchestrator/packages/testenv"
)

// downUntilStarted reserves an address where nothing listens; start then
// forwards it to target: a dependency that is down until it returns.
func downUntilStarted(t *testing.T, target string) (addr string, start func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr = ln.Addr().String()
	ln.Close()
	return addr, func() {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					u, err := net.Dial("tcp", target)
					if err != nil {
						return
					}
					defer u.Close()
					go io.Copy(u, c)
					io.Copy(c, u)
				}()
			}
		}()
	}
}

func rehost(t *testing.T, raw string, start func(target string) (string, func())) (string, func()) {
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	addr, up := start(u.Host)
	u.Host = addr
	return u.String(), up
}

// Issue 10, point 3: a worker started while PostgreSQL and Redis are down
// waits for them, saying so, and starts working when they return.
func TestRunWaitsForItsDependencies(t *testing.T) {
	t.Parallel()
	pg := testenv.Postgres(t)
	r := testenv.LeaseRedis(t)
	pgURL, pgUp := rehost(t, pg.URL, func(h string) (string, func()) { return downUntilStarted(t, h) })
	redisURL, redisUp := rehost(t, r.URL, func(h string) (string, func()) { return downUntilStarted(t, h) })
	out := &testenv.Buffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var runErr error
	go func() {
		defer close(done)
		runErr = run(ctx, nil, envOf(map[string]string{
			"DATABASE_URL":            pgURL,
			"REDIS_URL":               redisURL,
			"WORKER_METRICS_ADDR":     "127.0.0.1:0",
			"LOG_FORMAT":              "text", // the assertions read key=value lines
			"WORKER_SHUTDOWN_TIMEOUT": "1s",
		}), out)
	}()
	defer func() {
		cancel()
		<-done
		if runErr != nil {
			t.Errorf("run: %v", runErr)
		}
	}()
	waitFor := func(what string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(out.String(), what) {
			select {
			case <-done:
				t.Fatalf("run returned %v before %q; output:\n%s", runErr, what, out.String())
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %q within 30 s; output:\n%s", what, out.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitFor("dependency=postgres attempt=2")
	pgUp()
	waitFor("dependency=redis attempt=2")
	redisUp()
	waitFor("worker started")
}
