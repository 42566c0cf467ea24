package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"time"
)

// This file holds what stands between asynqmon and an operator's browser:
// cross-origin refusal, a Content-Security-Policy that keeps the page on the
// dashboard's origin, the public assets a browser fetches without
// credentials, and access logging. asynqmon itself has none of these.

// publicAssets are fetched by browsers without credentials (a web app
// manifest and the icons it names are requested in "omit credentials" mode,
// so behind basic auth they answered 401 in the console). They are asynqmon's
// stock files and hold nothing about the queues.
var publicAssets = []string{
	"/manifest.json", "/favicon.ico", "/favicon-16x16.png", "/favicon-32x32.png",
	"/apple-touch-icon.png", "/android-chrome-192x192.png", "/android-chrome-512x512.png", "/robots.txt",
}

var (
	// asynqmon's index links Google Fonts (Roboto, Material Icons). The page
	// renders without them (system sans-serif; its icons are inline SVG).
	thirdPartyLink = regexp.MustCompile(`<link[^>]+href="https?://[^"]*"[^>]*/?>`)
	inlineScript   = regexp.MustCompile(`(?s)<script>(.*?)</script>`)
)

// page is the rewritten index page and the headers that go with it.
type page struct {
	raw  []byte // asynqmon's own index, to recognise it (it is also its SPA fallback)
	html []byte // the same without third-party links
	csp  string
	// manifest is asynqmon's manifest with icon paths under the root path
	// (its stock file names them at the host root).
	manifest []byte
	ui       *patchedUI // asynqmon's main script made readable (readable.go)
}

// buildPage renders asynqmon's index and manifest once and derives the
// served versions. The inline scripts (the root-path flags and webpack's
// runtime) are allowed by their hashes, so the policy needs no
// 'unsafe-inline' for scripts; styles need it, because Material-UI injects
// its style sheets at run time.
func buildPage(mon http.Handler, root string) (*page, error) {
	get := func(path string) ([]byte, error) {
		rec := httptest.NewRecorder()
		mon.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, root+path, nil))
		if rec.Code != http.StatusOK {
			return nil, fmt.Errorf("asynqmon %s: %d", path, rec.Code)
		}
		return rec.Body.Bytes(), nil
	}
	raw, err := get("/")
	if err != nil {
		return nil, err
	}
	p := &page{raw: raw, html: withCSS(thirdPartyLink.ReplaceAll(raw, nil))}
	if p.ui, err = patchUI(mon, raw); err != nil {
		return nil, err
	}
	hashes := []string{}
	for _, m := range inlineScript.FindAllSubmatch(p.html, -1) {
		sum := sha256.Sum256(m[1])
		hashes = append(hashes, "'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'")
	}
	p.csp = strings.Join([]string{
		"default-src 'none'",
		"script-src 'self' " + strings.Join(hashes, " "),
		"style-src 'self' 'unsafe-inline'",
		"img-src 'self' data:",
		"font-src 'self' data:",
		"connect-src 'self'",
		"manifest-src 'self'",
		"base-uri 'none'",
		"form-action 'none'",
		"frame-ancestors 'none'",
	}, "; ")
	m, err := get("/manifest.json")
	if err != nil {
		return nil, err
	}
	var man map[string]any
	if err := json.Unmarshal(m, &man); err != nil {
		return nil, fmt.Errorf("asynqmon manifest: %w", err)
	}
	if icons, ok := man["icons"].([]any); ok {
		for _, ic := range icons {
			if o, ok := ic.(map[string]any); ok {
				if src, ok := o["src"].(string); ok && strings.HasPrefix(src, "/") {
					o["src"] = root + src
				}
			}
		}
	}
	man["start_url"] = root + "/"
	if p.manifest, err = json.Marshal(man); err != nil {
		return nil, err
	}
	return p, nil
}

// secure sets the headers every answer carries: the policy, no framing (the
// write actions must not be clickjacked either), no sniffing, no referrer.
func (p *page) secure(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", p.csp)
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "no-referrer")
		h.ServeHTTP(w, r)
	})
}

// rewriteIndex serves the cleaned index wherever asynqmon would serve its
// own (the root and, as a single-page app, any unknown path under it), and
// the readable main script and queue counts of readable.go. Other API
// answers pass straight through; other GET answers are buffered and
// compared with asynqmon's index (the static files are at most ~1 MB).
func (p *page) rewriteIndex(mon http.Handler, root string) http.Handler {
	api := root + "/api/"
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && queueAnswer(r.URL.Path, api) {
			rec := httptest.NewRecorder()
			mon.ServeHTTP(rec, r)
			body := rec.Body.Bytes()
			if rec.Code == http.StatusOK {
				body = notCompleted(body)
			}
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.Header().Del("Content-Length")
			w.WriteHeader(rec.Code)
			_, _ = w.Write(body)
			return
		}
		if r.Method != http.MethodGet || strings.HasPrefix(r.URL.Path, api) {
			mon.ServeHTTP(w, r)
			return
		}
		if r.URL.Path == p.ui.path {
			w.Header().Set("Content-Type", "application/javascript; charset=utf-8")
			// The stock script has the same name: a browser must not
			// keep either across a change of the patches.
			w.Header().Set("Cache-Control", "no-cache")
			_, _ = w.Write(p.ui.script)
			return
		}
		if r.URL.Path == root+"/manifest.json" {
			w.Header().Set("Content-Type", "application/manifest+json")
			_, _ = w.Write(p.manifest)
			return
		}
		rec := httptest.NewRecorder()
		mon.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		if rec.Code == http.StatusOK && bytes.Equal(body, p.raw) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Header().Set("Cache-Control", "no-store")
			_, _ = w.Write(p.html)
			return
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(body)
	})
}

// publicOrAuth serves publicAssets without credentials and everything else
// through auth.
func publicOrAuth(open, auth http.Handler, root string) http.Handler {
	public := make(map[string]bool, len(publicAssets))
	for _, a := range publicAssets {
		public[root+a] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if (r.Method == http.MethodGet || r.Method == http.MethodHead) && public[r.URL.Path] {
			open.ServeHTTP(w, r)
			return
		}
		auth.ServeHTTP(w, r)
	})
}

// crossOrigin refuses state-changing requests a browser sends from another
// origin: the attack was a page elsewhere auto-submitting a form to
// /api/queues/embeddings:pause, which the browser sent with the operator's
// cached basic-auth credentials. net/http's CrossOriginProtection decides
// from Sec-Fetch-Site (every browser since 2023) or else Origin against Host;
// GET, HEAD and OPTIONS pass (asynqmon changes state only with POST and
// DELETE). Requests with neither header (curl, scripts) are not browser
// requests and pass, still behind the credentials. trusted lists extra
// origins whose pages may write (a proxy that rewrites Host).
func crossOrigin(h http.Handler, trusted []string, log *slog.Logger) (http.Handler, error) {
	c := http.NewCrossOriginProtection()
	for _, o := range trusted {
		if err := c.AddTrustedOrigin(o); err != nil {
			return nil, fmt.Errorf("DASHBOARD_TRUSTED_ORIGINS: %w", err)
		}
	}
	c.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log.Warn("cross-origin request refused", "method", r.Method, "path", r.URL.Path,
			"origin", r.Header.Get("Origin"), "sec_fetch_site", r.Header.Get("Sec-Fetch-Site"), "remote", r.RemoteAddr)
		http.Error(w, "cross-origin request refused: the dashboard only accepts changes from its own pages", http.StatusForbidden)
	}))
	return c.Handler(h), nil
}

type statusWriter struct {
	http.ResponseWriter
	code  int
	bytes int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	n, err := s.ResponseWriter.Write(b)
	s.bytes += n
	return n, err
}

// accessLog writes one line per request: who (the basic-auth user name,
// never the password), what, the answer and how long it took. Writes
// (POST, DELETE) are what an operator wants to find later ("who paused the
// queue"), so they are logged at Info like the rest; the polling of an
// open dashboard is a few lines every few seconds.
func accessLog(h http.Handler, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		h.ServeHTTP(sw, r)
		user, _, _ := r.BasicAuth()
		if sw.code == 0 {
			sw.code = http.StatusOK
		}
		log.Info("access", "method", r.Method, "path", r.URL.Path, "status", sw.code, "bytes", sw.bytes,
			"ms", float64(time.Since(start).Microseconds())/1000, "user", user, "remote", r.RemoteAddr)
	})
}
