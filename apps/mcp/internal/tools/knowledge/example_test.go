package knowledge_test

import (
	"context"
	"fmt"
	"log"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	kt "github.com/agentfleet/orchestrator/apps/mcp/internal/tools/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/testenv"
)

// ExampleRegister adds the knowledge tools to a Go SDK server over the
// knowledge service, and lists them as a client sees them, each with the
// scope a token needs to call it. The server package does this too, and
// wraps every call in authentication, scope checks, rate limits and audit.
func ExampleRegister() {
	ctx := context.Background()
	// The service works on a fresh migrated database, as the MCP server's
	// tests get one (testenv; TEST_DATABASE_URL names the server).
	d, err := testenv.OpenPostgres(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	svc := knowledge.New(d.Pool, knowledge.Options{})

	srv := mcp.NewServer(&mcp.Implementation{Name: "knowledge", Version: "v0"}, nil)
	kt.Register(srv, svc, kt.Options{})

	// A client connected in memory (the server package serves the same
	// server over HTTP and stdio).
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "example", Version: "v0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, t := range tools.Tools {
		fmt.Printf("%-20s %s\n", t.Name, kt.ScopeOf(t.Name))
	}

	// Output:
	// document_upload_append knowledge:write
	// document_upload_finish knowledge:write
	// document_upload_start knowledge:write
	// forget_knowledge     knowledge:delete
	// get_knowledge        knowledge:read
	// link_knowledge       knowledge:write
	// list_knowledge       knowledge:read
	// list_relations       knowledge:read
	// search_knowledge     knowledge:read
	// store_document       knowledge:write
	// store_knowledge      knowledge:write
	// supersede_knowledge  knowledge:write
	// unlink_knowledge     knowledge:write
}
