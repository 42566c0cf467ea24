package main

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/hibiken/asynqmon"

	"github.com/agentfleet/orchestrator/db"
	"github.com/agentfleet/orchestrator/packages/appenv"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/jobs"
)

// Defaults: loopback only, so a dashboard that can delete and re-run tasks
// is never exposed by accident.
const (
	DefaultAddr = "127.0.0.1:8090"
	DefaultUser = "admin"
)

// run serves the dashboard until ctx is done.
//
// Environment: DASHBOARD_ADDR, REDIS_URL, DASHBOARD_USER (default admin),
// DASHBOARD_PASSWORD (required), DASHBOARD_READONLY (true: view only),
// DASHBOARD_ROOT_PATH (default /: the path the dashboard is served under, for
// a proxy at e.g. /asynq/ that forwards the path unchanged),
// DASHBOARD_TRUSTED_ORIGINS (comma-separated origins whose pages may send
// writes besides the dashboard's own, for a proxy that rewrites Host),
// DASHBOARD_INSECURE_NO_AUTH (true: serve without credentials; the flag
// -insecure-no-auth does the same). Without a password and without the
// explicit insecure switch it refuses to start.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := flag.NewFlagSet("dashboard", flag.ContinueOnError)
	fs.SetOutput(stdout)
	insecure := fs.Bool("insecure-no-auth", false, "serve without credentials (never on a shared network)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	env := appenv.New(getenv)
	*insecure = env.Bool("DASHBOARD_INSECURE_NO_AUTH", false) || *insecure
	readOnly := env.Bool("DASHBOARD_READONLY", false)
	user := env.String("DASHBOARD_USER", DefaultUser)
	password := getenv("DASHBOARD_PASSWORD") // as set: spaces may be part of it
	addr := env.String("DASHBOARD_ADDR", DefaultAddr)
	redisURL := env.String("REDIS_URL", db.DefaultRedisURL)
	root := env.String("DASHBOARD_ROOT_PATH", "/")
	if !strings.HasPrefix(root, "/") || strings.ContainsAny(root, "?#\"\\ ") {
		env.Fail("DASHBOARD_ROOT_PATH", "must be a URL path starting with / (e.g. /asynq)")
	}
	var trusted []string
	for _, o := range strings.Split(getenv("DASHBOARD_TRUSTED_ORIGINS"), ",") {
		if o = strings.TrimSpace(o); o != "" {
			trusted = append(trusted, o)
		}
	}
	log := env.Logger("dashboard", "DASHBOARD_", stdout)
	if err := env.Err(); err != nil {
		return err
	}
	if password == "" && !*insecure {
		return errors.New("DASHBOARD_PASSWORD is not set: refusing to serve the queue dashboard without credentials " +
			"(set DASHBOARD_USER and DASHBOARD_PASSWORD, or DASHBOARD_INSECURE_NO_AUTH=true on a machine of your own)")
	}
	// One Redis or a Redis Cluster (knowledge.ParseRedisURL).
	rcfg, err := knowledge.ParseRedisURL(redisURL)
	if err != nil {
		return fmt.Errorf("REDIS_URL: %w", err)
	}
	redisOpt := rcfg.Asynq()
	root = strings.TrimSuffix(root, "/") // "" for the host root, as asynqmon keeps it

	mon := asynqmon.New(asynqmon.Options{
		RootPath: root + "/", RedisConnOpt: redisOpt, ReadOnly: readOnly,
		// One line per task instead of a batch's whole JSON (jobs/format.go).
		PayloadFormatter: asynqmon.PayloadFormatterFunc(jobs.FormatPayload),
		ResultFormatter:  asynqmon.ResultFormatterFunc(jobs.FormatResult),
	})
	defer mon.Close()
	pg, err := buildPage(mon, root)
	if err != nil {
		return err
	}
	// Outside in: access log; security headers on every answer; refusal of
	// cross-origin writes before anything else (credentials or not, a forged
	// request never reaches Redis); public assets; credentials; asynqmon with
	// its index cleaned of third-party links.
	app := pg.rewriteIndex(mon, root)
	var h http.Handler = app
	if password != "" {
		h = publicOrAuth(app, basicAuth(app, user, password, log), root)
	}
	h, err = crossOrigin(h, trusted, log)
	if err != nil {
		return err
	}
	h = accessLog(pg.secure(h), log)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("DASHBOARD_ADDR: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	mode := "basic auth user " + user
	if password == "" {
		mode = "NO AUTHENTICATION (insecure mode)"
	}
	fmt.Fprintf(stdout, "dashboard on http://%s%s/ (%s)\n", ln.Addr(), root, mode)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}

// basicAuth guards h. Both sides are hashed before the constant-time
// comparison, so neither the length nor the content of the secret leaks
// through timing.
//
// A request that carries credentials which do not match is logged as a
// failed login (the user name tried and the remote address, never the
// password). A request without credentials is not: every browser's first
// request has none, and answering it with 401 is how the login prompt opens.
func basicAuth(h http.Handler, user, password string, log *slog.Logger) http.Handler {
	wantU, wantP := sha256.Sum256([]byte(user)), sha256.Sum256([]byte(password))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		gotU, gotP := sha256.Sum256([]byte(u)), sha256.Sum256([]byte(p))
		uOK := subtle.ConstantTimeCompare(gotU[:], wantU[:])
		pOK := subtle.ConstantTimeCompare(gotP[:], wantP[:])
		if !ok || uOK&pOK != 1 {
			if ok {
				log.Warn("login failed", "user", u, "remote", r.RemoteAddr, "path", r.URL.Path)
			}
			w.Header().Set("WWW-Authenticate", `Basic realm="asynq dashboard", charset="UTF-8"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}
