package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agentfleet/orchestrator/packages/knowledge/jobs"
)

// webDriver is the least of the W3C WebDriver protocol a test needs, spoken
// to Debian's chromedriver over HTTP.
type webDriver struct {
	t    *testing.T
	base string
	sid  string
}

func (d *webDriver) call(method, path string, body any) map[string]any {
	d.t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, d.base+path, r)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		d.t.Fatalf("webdriver %s %s: %v", method, path, err)
	}
	if resp.StatusCode != 200 {
		d.t.Fatalf("webdriver %s %s: %d %v", method, path, resp.StatusCode, out)
	}
	return out
}

func startBrowser(t *testing.T) *webDriver {
	t.Helper()
	driver, err := exec.LookPath("chromedriver")
	if err != nil {
		t.Skip("chromedriver is not installed (apt-get install chromium chromium-driver)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(driver, fmt.Sprintf("--port=%d", port))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	d := &webDriver{t: t, base: fmt.Sprintf("http://127.0.0.1:%d", port)}
	for deadline := time.Now().Add(10 * time.Second); ; {
		if resp, err := http.Get(d.base + "/status"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("chromedriver did not start")
		}
		time.Sleep(50 * time.Millisecond)
	}
	profile := t.TempDir()
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--user-data-dir=" + profile}
	opts := map[string]any{"args": args}
	if b, err := exec.LookPath("chromium"); err == nil {
		opts["binary"] = b
	}
	s := d.call("POST", "/session", map[string]any{"capabilities": map[string]any{"alwaysMatch": map[string]any{"goog:chromeOptions": opts}}})
	d.sid = s["value"].(map[string]any)["sessionId"].(string)
	t.Cleanup(func() {
		req, _ := http.NewRequest("DELETE", d.base+"/session/"+d.sid, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	})
	return d
}

func (d *webDriver) open(u string) {
	d.t.Helper()
	d.call("POST", "/session/"+d.sid+"/url", map[string]any{"url": u})
}

func (d *webDriver) script(js string) any {
	d.t.Helper()
	return d.call("POST", "/session/"+d.sid+"/execute/async", map[string]any{"script": js, "args": []any{}})["value"]
}

// TestBrowserCrossSiteForm is the attack of issue 13 in a real browser: the
// operator has logged in to the dashboard (the browser caches the basic-auth
// credentials), then visits a page on another site that auto-submits a form
// to the pause endpoint. The queue must stay running, and the dashboard's
// own page must still be able to pause it. Skipped without chromedriver.
func TestBrowserCrossSiteForm(t *testing.T) {
	if os.Getenv("DASHBOARD_BROWSER_TEST") == "" {
		t.Skip("set DASHBOARD_BROWSER_TEST=1 to run it in headless Chromium")
	}
	d := startBrowser(t)
	base, r, out := startFull(t, map[string]string{"DASHBOARD_USER": "ops", "DASHBOARD_PASSWORD": "s3cret"})
	insp := inspector(t, r)
	bu, _ := url.Parse(base)
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `<html><body><form method="POST" action="%sapi/queues/%s:pause"><input name="x" value="1"></form>
<script>document.forms[0].submit()</script></body></html>`, base, jobs.Queue)
	}))
	defer evil.Close()
	// Another site: "localhost" against the dashboard's 127.0.0.1.
	evilURL := strings.Replace(evil.URL, "127.0.0.1", "localhost", 1)

	logged := *bu
	logged.User = url.UserPassword("ops", "s3cret")
	d.open(logged.String()) // the operator logs in
	d.open(evilURL + "/")   // and visits the attacker's page
	waitFor(t, out, "cross-origin request refused")
	time.Sleep(300 * time.Millisecond)
	if paused(t, insp) {
		t.Fatal("a page on another site paused the queue through the operator's browser")
	}
	// The dashboard's own page, same browser, same credentials: allowed.
	d.open(base)
	res := d.script(fmt.Sprintf(`const done = arguments[0];
fetch("api/queues/%s:pause", {method: "POST"}).then(r => done(r.status), e => done(String(e)));`, jobs.Queue))
	if s, ok := res.(float64); !ok || s >= 300 {
		t.Fatalf("same-origin pause from the dashboard's page: %v", res)
	}
	if !paused(t, insp) {
		t.Fatal("the dashboard's own page could not pause the queue")
	}
}
