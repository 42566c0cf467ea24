package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/agentfleet/orchestrator/apps/mcp/internal/authn"
	kt "github.com/agentfleet/orchestrator/apps/mcp/internal/tools/knowledge"
	"github.com/agentfleet/orchestrator/packages/tenancy"
)

// Paths served.
const (
	PathMCP      = "/mcp"
	PathMetadata = "/.well-known/oauth-protected-resource"
)

// handler is the whole HTTP surface.
func (s *Server) handler() http.Handler {
	// The protected resource metadata (RFC 9728) is served, and named in
	// the 401 and 403 challenges, only when an authorization server is
	// configured (MCP_OAUTH_ISSUER): metadata naming none sends MCP
	// clients into an OAuth flow they cannot finish (docs/mcp.md, "Auth").
	metadataURL := ""
	if s.oauth != nil {
		metadataURL = s.publicURL + PathMetadata + PathMCP
	}
	srv := s.newMCPServer(httpPrincipal)

	// Stateless: every POST is a self-contained exchange with a throwaway
	// session, so any replica can answer any request and nothing is kept
	// between requests (docs/mcp.md, "Stateless").
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
		Stateless:           true,
		JSONResponse:        true,
		Logger:              newSDKLogger(s.logger),
		MaxRequestBodyBytes: s.documentBodyLimit(), // the gate holds other calls to MaxBodyBytes
	})
	// s.authenticate verifies the token (and answers every refusal); the
	// SDK's middleware only carries the verified principal into the
	// request's TokenInfo, where the Streamable HTTP handler picks it up.
	bearer := auth.RequireBearerToken(authn.Verified, &auth.RequireBearerTokenOptions{
		ResourceMetadataURL: metadataURL,
		// Tokens without expiry are valid until revoked; expiry, when
		// set, is checked by the verifier on every use.
		AllowMissingExpiration: true,
	})

	noOAuth := s.noOAuth()
	var meta http.Handler = noOAuth
	if s.oauth != nil {
		meta = auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
			Resource:               s.publicURL + PathMCP,
			AuthorizationServers:   []string{s.oauth.Issuer()},
			ScopesSupported:        tenancy.Catalogue,
			BearerMethodsSupported: []string{"header"},
			ResourceName:           "Agent fleet knowledge (MCP)",
			ResourceDocumentation:  s.publicURL + "/",
		})
	}

	mux := http.NewServeMux()
	mux.Handle(PathMCP, s.clocked(s.counted("mcp", s.limit(s.authenticate(metadataURL, bearer(s.scopeGate(metadataURL, mcpHandler)))))))
	mux.Handle(PathMetadata, s.counted("metadata", meta))
	mux.Handle(PathMetadata+PathMCP, s.counted("metadata", meta))
	// Clients that meet a 401 without protected resource metadata fall
	// back to the 2025-03-26 authorization spec: an authorization server
	// at this origin, then its default endpoints. None is served here
	// (with MCP_OAUTH_ISSUER the metadata names the real one), and the
	// answer says so in words the client shows its user (the MCP
	// inspector's CLI ends its attempt with the /register answer).
	for _, p := range []string{"/.well-known/oauth-authorization-server", "/.well-known/openid-configuration", "/register", "/authorize", "/token"} {
		mux.Handle(p, s.counted("oauth_fallback", noOAuth))
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"status":"ok"}`+"\n")
	})
	mux.HandleFunc("GET /readyz", s.readyz)
	scrape := promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		// Every call answered before the scrape is counted in it: the
		// records run after the answers (Server.later).
		ctx, cancel := context.WithTimeout(r.Context(), time.Second)
		s.Flush(ctx)
		cancel()
		scrape.ServeHTTP(w, r)
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "Agent fleet knowledge MCP server %s\nMCP endpoint (Streamable HTTP, bearer token): %s%s\nSee docs/mcp.md.\n", Version, s.publicURL, PathMCP)
	})
	return mux
}

// readyz answers 200 when every dependency answers a ping within 2 s.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	status := map[string]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	ok := true
	for name, p := range s.deps.Ready {
		wg.Go(func() {
			err := p.Ping(ctx)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				ok = false
				status[name] = "unreachable"
				s.logger.Warn("readiness check failed", "dependency", name, "err", err)
				return
			}
			status[name] = "ok"
		})
	}
	wg.Wait()
	w.Header().Set("Content-Type", "application/json")
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	json.NewEncoder(w).Encode(map[string]any{"ready": ok, "dependencies": status})
}

// rpcPeek is the part of a JSON-RPC request the scope gate reads.
type rpcPeek struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Name      string          `json:"name"`
		URI       string          `json:"uri"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"params"`
}

// scopeGate reads the body of an MCP request, once, and answers HTTP 403
// with error="insufficient_scope" (the MCP authorization spec's way) when
// the request calls a tool or reads a resource (the stepUp paths) the
// token's scopes do not grant: nothing of the request runs then. The body
// is a JSON-RPC error naming the missing scope, which the go-sdk client
// (and others) surface as the call's error. The check and the refusal's
// record are the gate's (refuseScope); the calls it let through are marked
// so that the gate does not check them again (scopeChecked). It also holds
// the body to MCP_MAX_BODY_BYTES unless every message calls
// store_document, which may send up to MCP_MAX_DOCUMENT_BODY_BYTES (413
// beyond either).
func (s *Server) scopeGate(metadataURL string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		p := authn.FromTokenInfo(auth.TokenInfoFromContext(r.Context()))
		if p == nil {
			r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.documentBodyLimit()))
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				http.Error(w, fmt.Sprintf("request body exceeds %d bytes", mbe.Limit), http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, "cannot read request body", http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		msgs, err := readRequests(body)
		if err != nil {
			var eb *errBody
			errors.As(err, &eb)
			badRequest(w, eb.code, eb.msg)
			return
		}
		if int64(len(body)) > s.cfg.MaxBodyBytes && !allLargeBody(msgs) {
			http.Error(w, fmt.Sprintf("request body exceeds %d bytes (only a request calling store_document alone may have up to %d)",
				s.cfg.MaxBodyBytes, s.documentBodyLimit()), http.StatusRequestEntityTooLarge)
			return
		}
		checked := scopeChecked{}
		for _, m := range msgs {
			c, ok := callOf(m.Method, m.Params.Name, m.Params.URI, m.Params.Arguments)
			if !ok || !c.path.stepUp {
				continue
			}
			eb, refused := s.refuseScope(r.Context(), p, c, time.Now())
			if !refused {
				checked[c.key()] = struct{}{}
				continue
			}
			data, _ := json.Marshal(kt.ErrorPayload{Error: eb})
			scope, what := eb.RequiredScope, c.what()
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer error="insufficient_scope", scope=%q%s, error_description=%q`,
				scope, challengeMetadata(metadataURL), what+" needs the "+scope+" scope"))
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			id := m.ID
			if len(id) == 0 {
				id = json.RawMessage("null")
			}
			json.NewEncoder(w).Encode(map[string]any{
				"jsonrpc": "2.0",
				"id":      id,
				"error":   map[string]any{"code": kt.ErrorCodeForbidden, "message": eb.Text(), "data": json.RawMessage(data)},
			})
			return
		}
		// The token info is the request's own (authn.Verified), and the
		// SDK hands it to the gate with every message of this request.
		if ti := auth.TokenInfoFromContext(r.Context()); ti != nil && len(checked) > 0 {
			if ti.Extra == nil {
				ti.Extra = map[string]any{}
			}
			ti.Extra[scopeCheckedKey] = checked
		}
		next.ServeHTTP(w, r)
	})
}

// scopeChecked is the set of calls of one request whose scope scopeGate
// checked and found granted, so that the gate does not check it again.
// It is keyed by what the check read (the method, the tool, the URI): a
// call the SDK read otherwise than the scope gate is not in it, and the
// gate checks it as it checks every call over stdio.
type scopeChecked map[callKey]struct{}

// scopeCheckedKey is scopeChecked's key in the token info (auth.TokenInfo
// Extra), the request's state the go-sdk carries to the gate
// (mcp.RequestExtra.TokenInfo).
const scopeCheckedKey = "knowledge.scopeChecked"

// callKey is what a scope check reads of a call.
type callKey struct{ method, name, uri string }

func (c call) key() callKey { return callKey{c.path.method, c.name, c.uri} }

// scopeCheckedAtEdge: scopeGate checked c's scope in req's HTTP request.
func scopeCheckedAtEdge(req mcp.Request, c call) bool {
	ex := req.GetExtra()
	if ex == nil || ex.TokenInfo == nil {
		return false
	}
	checked, _ := ex.TokenInfo.Extra[scopeCheckedKey].(scopeChecked)
	_, ok := checked[c.key()]
	return ok
}

// documentBodyLimit is the body limit of a request calling a tool that
// takes a document (store_document): MCP_MAX_DOCUMENT_BODY_BYTES, at least
// MCP_MAX_BODY_BYTES. Every other request is held to MCP_MAX_BODY_BYTES by
// scopeGate, which reads the body anyway.
func (s *Server) documentBodyLimit() int64 {
	return max(s.cfg.MaxDocumentBodyBytes, s.cfg.MaxBodyBytes)
}

// allLargeBody: every message of the request calls a tool that may take a
// document-sized body.
func allLargeBody(msgs []rpcPeek) bool {
	for _, m := range msgs {
		if m.Method != "tools/call" || !kt.LargeBody(m.Params.Name) {
			return false
		}
	}
	return len(msgs) > 0
}

// clocked marks a request's arrival and its answer's end for the stage
// clock, when the benchmark turned it on (Deps.Stages).
func (s *Server) clocked(next http.Handler) http.Handler {
	rec := s.deps.Stages
	if rec == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.Arrive()
		next.ServeHTTP(w, r)
		rec.Written()
	})
}

// counted counts requests by route and status.
func (s *Server) counted(route string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		s.metrics.httpRequests.WithLabelValues(route, strconv.Itoa(rec.status)).Inc()
		if rec.status == http.StatusUnauthorized {
			s.logger.Info("request refused: no valid bearer token", "route", route, "remote", remoteHost(r))
		}
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (r *statusRecorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	r.wrote = true
	return r.ResponseWriter.Write(b)
}

func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func remoteHost(r *http.Request) string {
	if i := strings.LastIndexByte(r.RemoteAddr, ':'); i > 0 {
		return r.RemoteAddr[:i]
	}
	return r.RemoteAddr
}

// challengeMetadata is the resource_metadata parameter of a Bearer
// challenge (with its leading comma), or nothing without metadata.
func challengeMetadata(metadataURL string) string {
	if metadataURL == "" {
		return ""
	}
	return fmt.Sprintf(", resource_metadata=%q", metadataURL)
}

// noOAuth answers the OAuth discovery and endpoint paths this server does
// not serve: 404 with an OAuth-style error saying what to do instead.
func (s *Server) noOAuth() http.Handler {
	desc := "this server is not an OAuth authorization server and names none: it takes bearer tokens issued by its operators (ctl token create, sent as Authorization: Bearer kn_...); a 401 from it means the token sent is missing, malformed, unknown, revoked or expired"
	if s.oauth != nil {
		desc = "this server is not an OAuth authorization server: its authorization server is " + s.oauth.Issuer() + " (" + PathMetadata + PathMCP + " names it)"
	}
	body, _ := json.Marshal(map[string]string{"error": "not_found", "error_description": desc})
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		w.Write(append(body, '\n'))
	})
}
