package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/agentfleet/orchestrator/packages/knowledge/jobs"
	"github.com/agentfleet/orchestrator/packages/tenancy"
	"github.com/agentfleet/orchestrator/packages/testenv"
)

// The browser tests drive Debian's Chromium (package chromium,
// /usr/bin/chromium; CHROMIUM names another) headless through the DevTools
// protocol. Without it they skip, except in CI (CI set), which installs it
// (go tool task setup -- --browser) and must not pass by skipping.

// browser starts headless Chromium for t and returns its tab. When t
// fails, a screenshot of the tab is written to DASHBOARD_SCREENSHOTS (the
// system's temporary directory by default) and its path logged.
func browser(t *testing.T) context.Context {
	t.Helper()
	exe := os.Getenv("CHROMIUM")
	if exe == "" {
		exe, _ = exec.LookPath("chromium")
	}
	if exe == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("chromium is not installed, and CI must run the browser tests: go tool task setup -- --browser installs it")
		}
		t.Skip("chromium is not installed: the browser tests need Debian's chromium (go tool task setup -- --browser)")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	// The whole test has a minute: a page that never shows what is
	// waited for fails rather than hangs.
	ctx, cancelTime := context.WithTimeout(ctx, time.Minute)
	t.Cleanup(func() { cancelTime(); cancelTab(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("starting %s: %v", exe, err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Logf("no screenshot: %v", err)
			return
		}
		dir := os.Getenv("DASHBOARD_SCREENSHOTS")
		if dir == "" {
			dir = os.TempDir()
		}
		p := filepath.Join(dir, "dashboard-"+strings.ReplaceAll(t.Name(), "/", "-")+".png")
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Logf("no screenshot: %v", err)
			return
		}
		t.Logf("screenshot of the page: %s", p)
	})
	return ctx
}

// act runs browser actions, failing t with what was being done.
func act(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// await evaluates js until it returns true (what an operator would see
// once the page has polled the API), failing t after 20 s.
func await(t *testing.T, ctx context.Context, what, js string) {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := chromedp.Run(wctx, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingInterval(100*time.Millisecond))); err != nil {
		text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
		t.Fatalf("%s: %v; the page reads:\n%s", what, err, text)
	}
}

// TestBrowserReadableTasks is what an operator sees of a stuck batch: the
// org's name beside its whole id, the task's whole id, the payload in full
// without scrolling or hovering, and a queue count that leaves out the
// completed task asynq keeps.
func TestBrowserReadableTasks(t *testing.T) {
	ctx := browser(t)
	d := testenv.Postgres(t)
	org, err := tenancy.New(d.Pool).CreateOrg(context.Background(), "Acme Fleet")
	if err != nil {
		t.Fatal(err)
	}
	base, r, _ := startFull(t, map[string]string{"DASHBOARD_USER": "ops", "DASHBOARD_PASSWORD": "s3cret", "DATABASE_URL": d.AppURL()})
	completeOne(t, r)
	id := enqueue(t, r, org.ID, 3)
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte("ops:s3cret"))
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Authorization": auth}}); err != nil {
		t.Fatal(err)
	}

	act(t, ctx, "opening the overview", chromedp.Navigate(base))
	const table = `table[aria-label="queues overview table"]`
	await(t, ctx, "the queues table with its count column", fmt.Sprintf(`(() => {
		const t = document.querySelector(%q);
		if (!t) return false;
		const heads = [...t.querySelectorAll("thead th")].map(h => h.innerText.trim());
		const i = heads.indexOf("Not completed");
		const row = [...t.querySelectorAll("tbody tr")].find(r => r.innerText.includes(%q));
		return i >= 0 && !!row && row.cells[i].innerText.trim() === "1";
	})()`, table, jobs.Queue))

	act(t, ctx, "opening the pending tasks", chromedp.Navigate(base+"queues/"+jobs.Queue+"?status=pending"))
	named := "org Acme Fleet (" + org.ID.String() + ")"
	await(t, ctx, "the task's whole id and its org's name", fmt.Sprintf(`(() => {
		const text = document.body.innerText;
		return text.includes(%q) && text.includes(%q);
	})()`, id, named))
	// The queue's banner: its label, and below it the count.
	await(t, ctx, "the queue's count without the completed task", `/Not completed\s*\n\s*1\s*\n/.test(document.body.innerText)`)
	clipped, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("td pre")]
		.filter(p => p.scrollWidth > p.clientWidth + 1 || p.scrollHeight > p.clientHeight + 1)
		.map(p => p.innerText)`))
	if err != nil {
		t.Fatal(err)
	}
	if len(clipped) > 0 {
		t.Errorf("payloads that do not fit their cell (the operator must scroll): %q", clipped)
	}
}

// TestBrowserCrossSiteForm is the attack of issue 13 in a real browser: the
// operator has logged in to the dashboard (the browser caches the basic-auth
// credentials), then visits a page on another site that auto-submits a form
// to the pause endpoint. The queue must stay running, and the dashboard's
// own page must still be able to pause it.
func TestBrowserCrossSiteForm(t *testing.T) {
	ctx := browser(t)
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
	act(t, ctx, "logging in", chromedp.Navigate(logged.String()))
	act(t, ctx, "visiting the other site", chromedp.Navigate(evilURL+"/"))
	waitFor(t, out, "cross-origin request refused")
	time.Sleep(300 * time.Millisecond)
	if paused(t, insp) {
		t.Fatal("a page on another site paused the queue through the operator's browser")
	}
	// The dashboard's own page, same browser, same credentials: allowed.
	act(t, ctx, "opening the dashboard", chromedp.Navigate(base))
	status, err := chromedp.Run(ctx, chromedp.Evaluate[any](fmt.Sprintf(
		`fetch("api/queues/%s:pause", {method: "POST"}).then(r => r.status, e => String(e))`, jobs.Queue), chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := status.(float64); !ok || s >= 300 {
		t.Fatalf("same-origin pause from the dashboard's page: %v", status)
	}
	if !paused(t, insp) {
		t.Fatal("the dashboard's own page could not pause the queue")
	}
}
