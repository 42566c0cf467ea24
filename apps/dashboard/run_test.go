package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentfleet/orchestrator/packages/testenv"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestRefusesWithoutPassword(t *testing.T) {
	t.Parallel()
	err := run(context.Background(), nil, envOf(map[string]string{"DASHBOARD_USER": "ops", "DASHBOARD_ADDR": "127.0.0.1:0"}), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "DASHBOARD_PASSWORD") {
		t.Fatalf("got %v, want a refusal naming DASHBOARD_PASSWORD", err)
	}
	err = run(context.Background(), nil, envOf(map[string]string{"DASHBOARD_INSECURE_NO_AUTH": "perhaps"}), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "DASHBOARD_INSECURE_NO_AUTH") {
		t.Fatalf("got %v", err)
	}
}

// start runs the dashboard and returns its base URL.
func start(t *testing.T, env map[string]string, args ...string) string {
	t.Helper()
	base, _, _ := startFull(t, env, args...)
	return base
}

// startFull is start that also returns the dashboard's Redis and its output.
func startFull(t *testing.T, env map[string]string, args ...string) (string, *testenv.Redis, *testenv.Buffer) {
	t.Helper()
	r := testenv.LeaseRedis(t)
	env["REDIS_URL"] = r.URL
	env["DASHBOARD_ADDR"] = "127.0.0.1:0"
	if _, ok := env["DATABASE_URL"]; !ok { // no names: nothing listens on port 1
		env["DATABASE_URL"] = "postgres://knowledge_app@127.0.0.1:1/knowledge?sslmode=disable"
	}
	out := &testenv.Buffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, envOf(env), out) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	re := regexp.MustCompile(`dashboard on (http://\S+/)`)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			return m[1], r, out
		}
		select {
		case err := <-done:
			t.Fatalf("run ended: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no address in output %q", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func get(t *testing.T, url, user, pass string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if user != "" || pass != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestServesWithCredentials(t *testing.T) {
	t.Parallel()
	base := start(t, map[string]string{"DASHBOARD_USER": "ops", "DASHBOARD_PASSWORD": "s3cret"})
	if code, _ := get(t, base, "", ""); code != http.StatusUnauthorized {
		t.Fatalf("no credentials: %d", code)
	}
	if code, _ := get(t, base, "ops", "wrong"); code != http.StatusUnauthorized {
		t.Fatalf("wrong password: %d", code)
	}
	if code, _ := get(t, base, "admin", "s3cret"); code != http.StatusUnauthorized {
		t.Fatalf("wrong user: %d", code)
	}
	code, body := get(t, base, "ops", "s3cret")
	if code != http.StatusOK || !strings.Contains(strings.ToLower(body), "<html") {
		t.Fatalf("index: %d %.200s", code, body)
	}
	code, body = get(t, base+"api/queues", "ops", "s3cret")
	if code != http.StatusOK || !strings.Contains(body, "queues") {
		t.Fatalf("api: %d %.200s", code, body)
	}
}

func TestInsecureModeIsExplicit(t *testing.T) {
	t.Parallel()
	base := start(t, map[string]string{}, "-insecure-no-auth")
	if code, _ := get(t, base+"api/queues", "", ""); code != http.StatusOK {
		t.Fatalf("insecure mode: %d", code)
	}
}

// A stop is not held, nor made an error, by a connection on which nothing
// was sent (Chromium opens spare ones) or by a request that outlasts the
// drain.
func TestStopCutsWhatOutlastsTheDrain(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	slow := make(chan struct{})
	defer close(slow)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-slow })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, ln, h, 200*time.Millisecond) }()
	spare, err := net.Dial("tcp", ln.Addr().String()) // says nothing
	if err != nil {
		t.Fatal(err)
	}
	defer spare.Close()
	go http.Get("http://" + ln.Addr().String() + "/") //nolint:errcheck // held by the handler, cut by the stop
	time.Sleep(100 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("stopping: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stop waited on the connections")
	}
}
