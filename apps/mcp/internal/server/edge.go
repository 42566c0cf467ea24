package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentfleet/orchestrator/apps/mcp/internal/authn"
	"github.com/agentfleet/orchestrator/apps/mcp/internal/stages"
	"github.com/agentfleet/orchestrator/packages/tenancy"
)

// Retry-After values of the edge's 503s. Overload clears as soon as calls
// finish (a second is plenty); an outage of a dependency usually lasts
// longer, so clients back off a little more.
const (
	retryAfterOverload = 1 * time.Second
	retryAfterOutage   = 5 * time.Second
)

// limit bounds the MCP requests in flight (Config.MaxInFlight). A request
// beyond the bound is answered at once with 503 and Retry-After: it never
// waits, so a flood costs neither memory nor database connections, and the
// server serves normally again the moment the flood stops. It runs before
// authentication, so a flood of bad tokens cannot hold the database either.
func (s *Server) limit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case s.slots <- struct{}{}:
		default:
			s.metrics.shed.Inc()
			unavailable(w, retryAfterOverload, "overloaded: this server is serving as many requests as it may; retry later")
			return
		}
		defer func() { <-s.slots }()
		next.ServeHTTP(w, r)
	})
}

// authenticate verifies the bearer token of every /mcp request with a
// deadline (authn.Verifier) and answers the refusals itself:
//
//   - no, malformed, unknown or forged token: 401 with the Bearer challenge
//     and one body for every reason, so a guesser learns nothing about
//     which check failed or whether a token exists;
//   - a genuine token (its secret or signature verified) that is revoked,
//     expired, not yet valid or meant for another resource: the same 401,
//     its error_description (challenge and JSON body) saying which, so an
//     agent knows to get a new token rather than check its configuration;
//   - the token store is down or too slow: 503 with Retry-After, because the
//     token may be fine and the client should retry, not re-authenticate.
//
// The verified principal travels in the request's context (see
// authn.Verified).
//
// The challenge (RFC 6750) names the protected resource metadata and the
// scopes a first token should ask for only when an authorization server is
// configured (metadataURL not empty); otherwise it is a plain Bearer
// challenge that sends no client into an OAuth flow. A request that
// presented a token also gets error="invalid_token".
func (s *Server) authenticate(metadataURL string, next http.Handler) http.Handler {
	challenge := `Bearer realm="agentfleet-knowledge"`
	if metadataURL != "" {
		challenge = fmt.Sprintf("Bearer resource_metadata=%q, scope=%q", metadataURL,
			tenancy.ScopeKnowledgeRead+" "+tenancy.ScopeKnowledgeWrite)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := authn.ErrInvalidToken
		tok, presented := bearerToken(r)
		if presented {
			var p *tenancy.Principal
			clock, t := s.deps.Stages.Current(), time.Now()
			p, err = s.verifier.Verify(stages.With(r.Context(), clock), tok)
			clock.Since(stages.Auth, t)
			if err == nil {
				next.ServeHTTP(w, r.WithContext(authn.WithPrincipal(r.Context(), p)))
				return
			}
		}
		if errors.Is(err, authn.ErrInvalidToken) {
			desc := authn.Generic
			if r := authn.Reason(err); r != nil {
				desc = r.Description
			}
			ch := challenge
			if presented {
				ch += `, error="invalid_token", error_description="` + desc + `"`
			}
			w.Header().Set("WWW-Authenticate", ch)
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			w.WriteHeader(http.StatusUnauthorized)
			json.NewEncoder(w).Encode(map[string]string{"error": "invalid_token", "error_description": desc})
			return
		}
		s.metrics.unavailable.WithLabelValues("token_store").Inc()
		unavailable(w, retryAfterOutage, authn.ErrUnavailable.Error())
	})
}

// bearerToken reads "Authorization: Bearer <token>" (scheme case-insensitive,
// RFC 6750).
func bearerToken(r *http.Request) (string, bool) {
	f := strings.Fields(r.Header.Get("Authorization"))
	if len(f) != 2 || !strings.EqualFold(f[0], "bearer") {
		return "", false
	}
	return f[1], true
}

// unavailable answers 503 with Retry-After (whole seconds, RFC 9110).
func unavailable(w http.ResponseWriter, after time.Duration, msg string) {
	w.Header().Set("Retry-After", strconv.Itoa(int((after+time.Second-1)/time.Second)))
	http.Error(w, msg, http.StatusServiceUnavailable)
}

// JSON-RPC error codes the edge answers with.
const (
	rpcParseError     = -32700
	rpcInvalidRequest = -32600
)

// badRequest answers 400 with a JSON-RPC error (id null: the request could
// not be read, so it has no id we trust).
func badRequest(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	json.NewEncoder(w).Encode(map[string]any{
		"jsonrpc": "2.0",
		"id":      nil,
		"error":   map[string]any{"code": code, "message": msg},
	})
}

// errBody is why a request body has no single reading.
type errBody struct {
	code int
	msg  string
}

func (e *errBody) Error() string { return e.msg }

// readRequests reads a request body the way the go-sdk does, and refuses
// what it would read differently from us:
//
//   - exactly one JSON value (a message or a batch), nothing after it but
//     white space: the SDK decodes the first value and silently drops the
//     rest, so "a valid call, then anything" would run a request the gate
//     never judged;
//   - keys are matched exactly (case-sensitively), as the SDK matches
//     them: "Name" is not "name";
//   - no key twice in a message or its params: which of two values a
//     decoder keeps is an implementation detail we will not depend on.
//
// What passes is handed to the SDK unchanged, so the scope gate and the SDK
// see one and the same request. Malformed messages inside a well-formed
// body (no method, params not an object) are left for the SDK to refuse.
func readRequests(body []byte) ([]rpcPeek, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	var v json.RawMessage
	if err := dec.Decode(&v); err != nil {
		return nil, &errBody{rpcParseError, "parse error: the body is not a JSON value"}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, &errBody{rpcParseError, "parse error: the body must be exactly one JSON value (a message or a batch); there is more after it"}
	}
	if v[0] != '[' {
		m, err := peekMessage(v)
		if err != nil {
			return nil, err
		}
		return []rpcPeek{m}, nil
	}
	var batch []json.RawMessage
	if err := json.Unmarshal(v, &batch); err != nil {
		return nil, &errBody{rpcParseError, "parse error: the body is not a JSON value"}
	}
	out := make([]rpcPeek, 0, len(batch))
	for _, raw := range batch {
		m, err := peekMessage(raw)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// peekMessage reads the id, method and the params' name and uri of one
// message, with exact keys.
func peekMessage(raw json.RawMessage) (rpcPeek, error) {
	var m rpcPeek
	obj, err := exactObject(raw)
	if err != nil || obj == nil {
		return m, err
	}
	m.ID = obj["id"]
	if err := unmarshalString(obj["method"], &m.Method); err != nil {
		return m, nil // not a string: the SDK refuses the message
	}
	params, err := exactObject(obj["params"])
	if err != nil || params == nil {
		return m, err
	}
	_ = unmarshalString(params["name"], &m.Params.Name)
	_ = unmarshalString(params["uri"], &m.Params.URI)
	m.Params.Arguments = params["arguments"]
	return m, nil
}

func unmarshalString(raw json.RawMessage, dst *string) error {
	if len(raw) == 0 {
		return nil
	}
	return json.Unmarshal(raw, dst)
}

// exactObject returns the members of a JSON object keyed exactly as written
// (nil, nil for a value that is not an object), refusing duplicate keys.
func exactObject(raw json.RawMessage) (map[string]json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil { // {
		return nil, &errBody{rpcParseError, "parse error: the body is not valid JSON"}
	}
	out := map[string]json.RawMessage{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, &errBody{rpcParseError, "parse error: the body is not valid JSON"}
		}
		key, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, &errBody{rpcParseError, "parse error: the body is not valid JSON"}
		}
		if _, dup := out[key]; dup {
			return nil, &errBody{rpcInvalidRequest, fmt.Sprintf("invalid request: the key %q appears twice in one object", key)}
		}
		out[key] = v
	}
	return out, nil
}
