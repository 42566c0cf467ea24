package tenancy_test

import (
	"context"
	"slices"
	"testing"

	"github.com/agentfleet/orchestrator/packages/tenancy"
	"github.com/agentfleet/orchestrator/packages/testenv"
	"github.com/agentfleet/orchestrator/packages/testenv/testfactory"
)

// TestFactoryTokensVerify pins testfactory's copy of the token format and
// of the scope catalogue to tenancy's: a factory token is one the server
// accepts, with the scopes it was written with.
func TestFactoryTokensVerify(t *testing.T) {
	t.Parallel()
	if !slices.Equal(testfactory.Scopes, tenancy.Catalogue) {
		t.Fatalf("testfactory.Scopes %v, tenancy.Catalogue %v", testfactory.Scopes, tenancy.Catalogue)
	}
	ctx := context.Background()
	db := testenv.Postgres(t)
	tok := testfactory.Token(ctx, t, db.Pool, &testfactory.TokenOpts{Scopes: []string{tenancy.ScopeKnowledgeRead}})
	p, err := tenancy.New(db.Pool).VerifyToken(ctx, tok.Text)
	if err != nil {
		t.Fatal(err)
	}
	if p.OrgID != tok.OrgID || p.AgentID != tok.AgentID || p.TokenID != tok.ID || !slices.Equal(p.Scopes, []string{tenancy.ScopeKnowledgeRead}) {
		t.Fatalf("principal %+v of token %+v", p, tok)
	}
}
