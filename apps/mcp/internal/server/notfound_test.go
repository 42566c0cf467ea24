package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A missing entry read as a resource answers MCP's resource-not-found
// code of the client's protocol: -32002 up to 2025-11-25, -32602 from
// 2026-07-28 (SEP-2164), with the URI in data either way.
func TestResourceNotFoundCodePerProtocol(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	a := b.agent(b.org("acme"), "a", allScopes, 0)
	uri := "knowledge://" + uuid.NewString()

	// The go-sdk client negotiates the newest protocol.
	cs := b.session(a)
	_, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("protocol %s: %v, want -32602", cs.InitializeResult().ProtocolVersion, err)
	}

	// 2025-06-18 (b.post's header), stateless.
	res := b.post(a.token, `{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"`+uri+`"}}`)
	defer res.Body.Close()
	var rpc struct {
		Error struct {
			Code int64           `json:"code"`
			Data json.RawMessage `json:"data"`
		} `json:"error"`
	}
	if err := json.NewDecoder(res.Body).Decode(&rpc); err != nil {
		t.Fatal(err)
	}
	var data struct{ URI string }
	json.Unmarshal(rpc.Error.Data, &data)
	if rpc.Error.Code != -32002 || data.URI != uri {
		t.Errorf("protocol 2025-06-18: code %d, data %s; want -32002 with the uri", rpc.Error.Code, rpc.Error.Data)
	}

	// A URI no template matches (the go-sdk's own not found): the same.
	res2 := b.post(a.token, `{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"uri":"test://template/123/data"}}`)
	defer res2.Body.Close()
	if err := json.NewDecoder(res2.Body).Decode(&rpc); err != nil {
		t.Fatal(err)
	}
	if rpc.Error.Code != -32002 {
		t.Errorf("another scheme, protocol 2025-06-18: code %d, want -32002", rpc.Error.Code)
	}
	_, err = cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "test://template/123/data"})
	if !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("another scheme, protocol %s: %v, want -32602", cs.InitializeResult().ProtocolVersion, err)
	}
}
