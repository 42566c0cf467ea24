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

	"github.com/hibiken/asynq"
	"github.com/hibiken/asynqmon"

	"github.com/agentfleet/orchestrator/db"
	"github.com/agentfleet/orchestrator/packages/appenv"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/jobs"
	"github.com/agentfleet/orchestrator/packages/tenancy"
)

// Defaults: loopback only, so a dashboard that can delete and re-run tasks
// is never exposed by accident.
const (
	DefaultAddr = "127.0.0.1:8090"
	DefaultUser = "admin"
)

// run serves the dashboard until ctx is done.
//
// Environment: DASHBOARD_ADDR, REDIS_URL, DATABASE_URL (where org names
// are read, as the application's role by default; names.go),
// DASHBOARD_USER (default admin),
// DASHBOARD_PASSWORD (required), DASHBOARD_READONLY (true: view only),
// DASHBOARD_ROOT_PATH (default /: the path the dashboard is served under, for
// a proxy at e.g. /asynq/ that forwards the path unchanged),
// DASHBOARD_TRUSTED_ORIGINS (comma-separated origins whose pages may send
// writes besides the dashboard's own, for a proxy that rewrites Host),
// DASHBOARD_INSECURE_NO_AUTH (true: serve without credentials; the flag
// -insecure-no-auth does the same). Without a password and without the
// explicit insecure switch it refuses to start.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	cfg, err := readConfig(args, getenv, stdout)
	if err != nil {
		return err
	}
	// Without connecting: the dashboard starts, and shows ids without
	// names, while PostgreSQL is down.
	pool, err := db.Connect(cfg.databaseURL)
	if err != nil {
		return fmt.Errorf("DATABASE_URL: %w", err)
	}
	defer pool.Close()
	names := newOrgNames(tenancy.New(pool).ListOrgs, cfg.log)
	mon := asynqmon.New(asynqmon.Options{
		RootPath: cfg.root + "/", RedisConnOpt: cfg.redis, ReadOnly: cfg.readOnly,
		// One line per task, orgs named, instead of a batch's whole JSON
		// (jobs/format.go).
		PayloadFormatter: asynqmon.PayloadFormatterFunc(func(taskType string, payload []byte) string {
			return jobs.FormatPayloadNamed(taskType, payload, names.name)
		}),
		ResultFormatter: asynqmon.ResultFormatterFunc(jobs.FormatResult),
	})
	defer mon.Close()
	h, err := handler(mon, cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return fmt.Errorf("DASHBOARD_ADDR: %w", err)
	}
	mode := "basic auth user " + cfg.user
	if cfg.password == "" {
		mode = "NO AUTHENTICATION (insecure mode)"
	}
	fmt.Fprintf(stdout, "dashboard on http://%s%s/ (%s)\n", ln.Addr(), cfg.root, mode)
	return serve(ctx, ln, h, drainTime)
}

// config is what the dashboard is started with.
type config struct {
	readOnly       bool
	user, password string
	addr           string
	databaseURL    string
	redis          asynq.RedisConnOpt
	root           string // "" for the host root, as asynqmon keeps it
	trusted        []string
	log            *slog.Logger
}

// readConfig reads the flags and the environment, every bad value named
// at once.
func readConfig(args []string, getenv func(string) string, stdout io.Writer) (config, error) {
	fs := flag.NewFlagSet("dashboard", flag.ContinueOnError)
	fs.SetOutput(stdout)
	insecure := fs.Bool("insecure-no-auth", false, "serve without credentials (never on a shared network)")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	env := appenv.New(getenv)
	*insecure = env.Bool("DASHBOARD_INSECURE_NO_AUTH", false) || *insecure
	cfg := config{
		readOnly: env.Bool("DASHBOARD_READONLY", false),
		user:     env.String("DASHBOARD_USER", DefaultUser),
		password: env.Raw("DASHBOARD_PASSWORD"), // as set: spaces may be part of it
		addr:     env.String("DASHBOARD_ADDR", DefaultAddr),
		// The application's role reads org names (orgs have no row-level
		// policy); the dashboard needs no more.
		databaseURL: env.String("DATABASE_URL", db.DefaultURL),
	}
	redisURL := env.String("REDIS_URL", db.DefaultRedisURL)
	root := env.String("DASHBOARD_ROOT_PATH", "/")
	if !strings.HasPrefix(root, "/") || strings.ContainsAny(root, "?#\"\\ ") {
		env.Fail("DASHBOARD_ROOT_PATH", "must be a URL path starting with / (e.g. /asynq)")
	}
	for _, o := range strings.Split(env.String("DASHBOARD_TRUSTED_ORIGINS", ""), ",") {
		if o = strings.TrimSpace(o); o != "" {
			cfg.trusted = append(cfg.trusted, o)
		}
	}
	cfg.log = env.Logger("dashboard", "DASHBOARD_", stdout)
	if err := env.Err(); err != nil {
		return config{}, err
	}
	if cfg.password == "" && !*insecure {
		return config{}, errors.New("DASHBOARD_PASSWORD is not set: refusing to serve the queue dashboard without credentials " +
			"(set DASHBOARD_USER and DASHBOARD_PASSWORD, or DASHBOARD_INSECURE_NO_AUTH=true on a machine of your own)")
	}
	// One Redis or a Redis Cluster (knowledge.ParseRedisURL).
	rcfg, err := knowledge.ParseRedisURL(redisURL)
	if err != nil {
		return config{}, fmt.Errorf("REDIS_URL: %w", err)
	}
	cfg.redis = rcfg.Asynq()
	cfg.root = strings.TrimSuffix(root, "/")
	return cfg, nil
}

// handler wraps asynqmon, outside in: access log; security headers on
// every answer; refusal of cross-origin writes before anything else
// (credentials or not, a forged request never reaches Redis); public
// assets; credentials; asynqmon with its index cleaned of third-party
// links.
func handler(mon *asynqmon.HTTPHandler, cfg config) (http.Handler, error) {
	pg, err := buildPage(mon, cfg.root)
	if err != nil {
		return nil, err
	}
	if len(pg.ui.missed) > 0 {
		cfg.log.Warn("asynqmon's page is not as readable.go expects: served without these changes",
			"missed", strings.Join(pg.ui.missed, "; "), "script", pg.ui.path)
	}
	app := pg.rewriteIndex(mon, cfg.root)
	var h http.Handler = app
	if cfg.password != "" {
		h = publicOrAuth(app, basicAuth(app, cfg.user, cfg.password, cfg.log), cfg.root)
	}
	h, err = crossOrigin(h, cfg.trusted, cfg.log)
	if err != nil {
		return nil, err
	}
	return accessLog(pg.secure(h), cfg.log), nil
}

// drainTime is how long a stopping dashboard lets its requests in flight
// finish.
const drainTime = 5 * time.Second

// serve serves h on ln until ctx is done, then drains it for drain and
// closes what is left: a request still running, or a connection on which
// nothing was sent yet (a browser opens spare ones ahead of its requests,
// and http.Server waits up to 5 s for one to say something). Either is
// the stop's to cut, not an error of the dashboard's: the operator's
// browser asks again.
func serve(ctx context.Context, ln net.Listener, h http.Handler, drain time.Duration) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close() // its listener is closed already: only the connections are left
	}
	return nil
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
