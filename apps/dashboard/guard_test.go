package main

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentfleet/orchestrator/packages/knowledge/jobs"
	"github.com/agentfleet/orchestrator/packages/testenv"
)

func do(t *testing.T, method, u string, hdr map[string]string, body io.Reader, user, pass string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func inspector(t *testing.T, r *testenv.Redis) *asynq.Inspector {
	t.Helper()
	opt := asynq.RedisClientOpt{Addr: r.Options.Addr, Password: r.Options.Password, DB: r.DB}
	c := asynq.NewClient(opt)
	// A task makes the queue exist, as the worker's traffic does.
	if _, err := c.Enqueue(asynq.NewTask(jobs.TypeEmbedBatch, []byte(`{"jobs":[]}`)), asynq.Queue(jobs.Queue)); err != nil {
		t.Fatal(err)
	}
	c.Close()
	i := asynq.NewInspector(opt)
	t.Cleanup(func() { i.Close() })
	return i
}

func paused(t *testing.T, i *asynq.Inspector) bool {
	t.Helper()
	q, err := i.GetQueueInfo(jobs.Queue)
	if err != nil {
		t.Fatal(err)
	}
	return q.Paused
}

// TestCrossSiteFormCannotPauseTheQueue reproduces the attack: a page on
// another origin auto-submits a form to the pause endpoint, and the browser
// sends it with the operator's cached basic-auth credentials. The requests
// below are what a browser sends for that form (a cross-site POST carries
// Sec-Fetch-Site: cross-site and the attacker's Origin; an older browser
// only the Origin).
func TestCrossSiteFormCannotPauseTheQueue(t *testing.T) {
	t.Parallel()
	base, r, out := startFull(t, map[string]string{"DASHBOARD_USER": "ops", "DASHBOARD_PASSWORD": "s3cret"})
	insp := inspector(t, r)
	pause := base + "api/queues/" + jobs.Queue + ":pause"
	form := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	attacks := []map[string]string{
		{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Origin": "https://evil.example"},
		{"Sec-Fetch-Site": "same-site", "Origin": "http://other.127.0.0.1.nip.io"},
		{"Origin": "https://evil.example"}, // a browser without Fetch Metadata
	}
	for _, h := range attacks {
		for k, v := range form {
			h[k] = v
		}
		resp := do(t, http.MethodPost, pause, h, strings.NewReader("x=1"), "ops", "s3cret")
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("forged pause with %v: %d, want 403", h, resp.StatusCode)
		}
		if paused(t, insp) {
			t.Fatalf("the queue was paused by a forged request with %v", h)
		}
	}
	// The other write actions are covered too (delete all, run all, ...).
	for _, u := range []string{
		"api/queues/" + jobs.Queue + "/archived_tasks:delete_all",
		"api/queues/" + jobs.Queue + "/pending_tasks:delete_all",
	} {
		resp := do(t, http.MethodDelete, base+u, attacks[0], nil, "ops", "s3cret")
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("forged DELETE %s: %d, want 403", u, resp.StatusCode)
		}
	}
	if n, err := insp.GetQueueInfo(jobs.Queue); err != nil || n.Pending != 1 {
		t.Fatalf("queue after forged deletes: %+v %v, want its task still pending", n, err)
	}
	// The dashboard's own page still works: same-origin fetches pass.
	own := map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": strings.TrimSuffix(base, "/")}
	if resp := do(t, http.MethodPost, pause, own, nil, "ops", "s3cret"); resp.StatusCode >= 300 {
		t.Fatalf("same-origin pause: %d", resp.StatusCode)
	}
	if !paused(t, insp) {
		t.Fatal("same-origin pause did not pause")
	}
	// A script without browser headers (curl) is not a CSRF vector and
	// still needs the credentials.
	resume := base + "api/queues/" + jobs.Queue + ":resume"
	if resp := do(t, http.MethodPost, resume, nil, nil, "", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("resume without credentials: %d", resp.StatusCode)
	}
	if resp := do(t, http.MethodPost, resume, nil, nil, "ops", "s3cret"); resp.StatusCode >= 300 || paused(t, insp) {
		t.Fatalf("resume by a script: %d", resp.StatusCode)
	}
	waitFor(t, out, "cross-origin request refused")
}

func waitFor(t *testing.T, out *testenv.Buffer, s string) string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(out.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("output lacks %q:\n%s", s, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return out.String()
}

func TestPageStaysOnItsOrigin(t *testing.T) {
	t.Parallel()
	base := start(t, map[string]string{"DASHBOARD_USER": "ops", "DASHBOARD_PASSWORD": "s3cret"})
	req, _ := http.NewRequest(http.MethodGet, base, nil)
	req.SetBasicAuth("ops", "s3cret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	csp := resp.Header.Get("Content-Security-Policy")
	if resp.StatusCode != 200 || csp == "" {
		t.Fatalf("index: %d, CSP %q", resp.StatusCode, csp)
	}
	if strings.Contains(string(body), "googleapis") || regexp.MustCompile(`(src|href)="https?:`).Match(body) {
		t.Fatalf("index still references a third party:\n%s", body)
	}
	if strings.Contains(csp, "http") || strings.Contains(csp, "script-src 'self' 'unsafe-inline'") {
		t.Fatalf("CSP allows another origin or inline scripts: %q", csp)
	}
	for _, d := range []string{"default-src 'none'", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, d) {
			t.Errorf("CSP lacks %q: %q", d, csp)
		}
	}
	// Every inline script of the page is allowed by its hash (or the page
	// would not start: it sets the root path and loads the chunks).
	scripts := regexp.MustCompile(`(?s)<script>(.*?)</script>`).FindAllSubmatch(body, -1)
	if len(scripts) == 0 {
		t.Fatal("no inline scripts found: did asynqmon's page change?")
	}
	for _, m := range scripts {
		sum := sha256.Sum256(m[1])
		if h := "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"; !strings.Contains(csp, h) {
			t.Errorf("inline script %.60q is not allowed by the CSP", m[1])
		}
	}
	// An unknown path (the single-page app's routes) gets the same page.
	code, routed := get(t, base+"queues/embeddings", "ops", "s3cret")
	if code != 200 || routed != string(body) {
		t.Fatalf("app route: %d, same page %v", code, routed == string(body))
	}
}

func TestManifestAndIconsNeedNoCredentials(t *testing.T) {
	t.Parallel()
	base := start(t, map[string]string{"DASHBOARD_USER": "ops", "DASHBOARD_PASSWORD": "s3cret", "DASHBOARD_ROOT_PATH": "/asynq/"})
	u, _ := url.Parse(base)
	if u.Path != "/asynq/" {
		t.Fatalf("base %s, want it under /asynq/", base)
	}
	code, body := get(t, base+"manifest.json", "", "")
	if code != 200 {
		t.Fatalf("manifest: %d", code)
	}
	var man struct {
		Icons []struct{ Src string } `json:"icons"`
	}
	if err := json.Unmarshal([]byte(body), &man); err != nil || len(man.Icons) == 0 {
		t.Fatalf("manifest %s: %v", body, err)
	}
	for _, ic := range man.Icons {
		if !strings.HasPrefix(ic.Src, "/asynq/") {
			t.Errorf("icon %q is not under the root path", ic.Src)
		}
		if code, _ := get(t, u.Scheme+"://"+u.Host+ic.Src, "", ""); code != 200 {
			t.Errorf("icon %s: %d", ic.Src, code)
		}
	}
	for _, p := range []string{"favicon.ico", "favicon-32x32.png"} {
		if code, _ := get(t, base+p, "", ""); code != 200 {
			t.Errorf("%s: %d", p, code)
		}
	}
	// Everything else still needs the credentials.
	for _, p := range []string{"", "api/queues", "queues/embeddings"} {
		if code, _ := get(t, base+p, "", ""); code != http.StatusUnauthorized {
			t.Errorf("/asynq/%s without credentials: %d", p, code)
		}
	}
}

// Behind a proxy at /asynq/ the page must ask for its scripts under
// /asynq/, not at the host root (where it was blank).
func TestServesUnderARootPath(t *testing.T) {
	t.Parallel()
	base := start(t, map[string]string{"DASHBOARD_USER": "ops", "DASHBOARD_PASSWORD": "s3cret", "DASHBOARD_ROOT_PATH": "/asynq"})
	code, body := get(t, base, "ops", "s3cret")
	if code != 200 {
		t.Fatalf("index: %d", code)
	}
	srcs := regexp.MustCompile(`<script src="([^"]+)"`).FindAllStringSubmatch(body, -1)
	if len(srcs) == 0 {
		t.Fatalf("no scripts in %s", body)
	}
	u, _ := url.Parse(base)
	for _, m := range srcs {
		if !strings.HasPrefix(m[1], "/asynq/static/") {
			t.Fatalf("script %s is not under the root path", m[1])
		}
		code, js := get(t, u.Scheme+"://"+u.Host+m[1], "ops", "s3cret")
		if code != 200 || len(js) < 1000 {
			t.Fatalf("script %s: %d, %d bytes", m[1], code, len(js))
		}
	}
	if code, _ := get(t, base+"api/queues", "ops", "s3cret"); code != 200 {
		t.Fatalf("api under the root path: %d", code)
	}
	if err := run(t.Context(), nil, envOf(map[string]string{"DASHBOARD_PASSWORD": "x", "DASHBOARD_ROOT_PATH": "asynq"}), io.Discard); err == nil ||
		!strings.Contains(err.Error(), "DASHBOARD_ROOT_PATH") {
		t.Fatalf("a root path without a slash: %v", err)
	}
}

func TestLogsAccessAndFailedLogins(t *testing.T) {
	t.Parallel()
	base, _, out := startFull(t, map[string]string{"DASHBOARD_USER": "ops", "DASHBOARD_PASSWORD": "s3cret", "LOG_FORMAT": "text"})
	get(t, base+"api/queues", "mallory", "guess-123")
	get(t, base+"api/queues", "ops", "s3cret")
	get(t, base+"api/queues", "", "") // the browser's first request: not a failed login
	logs := waitFor(t, out, "user=ops")
	if !regexp.MustCompile(`level=WARN msg="login failed" app=dashboard user=mallory`).MatchString(logs) {
		t.Errorf("no failed login logged:\n%s", logs)
	}
	if strings.Count(logs, "login failed") != 1 {
		t.Errorf("want exactly one failed login:\n%s", logs)
	}
	if strings.Contains(logs, "guess-123") || strings.Contains(logs, "s3cret") {
		t.Errorf("a password reached the log:\n%s", logs)
	}
	if !regexp.MustCompile(`msg=access app=dashboard method=GET path=/api/queues status=200 .* user=ops`).MatchString(logs) {
		t.Errorf("no access line for the operator's request:\n%s", logs)
	}
}
