package knowledge_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/tenancy"
	"github.com/agentfleet/orchestrator/packages/testenv"
)

// The limits the domain checks (its named constants, with a message naming
// the field) and the schema's CHECKs that repeat them (db/migrations) are
// one rule: a constant changed without a migration, or the other way round,
// fails here instead of letting the database refuse what the domain
// accepted, or the domain refuse what the schema allows.
func TestSchemaChecksMatchTheLimits(t *testing.T) {
	t.Parallel()
	pool := testenv.Postgres(t).Pool
	length := func(col string, max int) string {
		return fmt.Sprintf("CHECK (((char_length(%[1]s) >= 1) AND (char_length(%[1]s) <= %[2]d)))", col, max)
	}
	kinds := make([]string, len(domain.Kinds))
	for i, k := range domain.Kinds {
		kinds[i] = "'" + k + "'::text"
	}
	for _, tc := range []struct{ table, constraint, want string }{
		{"knowledge", "knowledge_body_check", length("body", domain.MaxBodyChars)},
		{"knowledge", "knowledge_title_check", length("title", domain.MaxTitleChars)},
		{"knowledge", "knowledge_source_check", length("source", domain.MaxSourceChars)},
		{"knowledge", "knowledge_tags_check", fmt.Sprintf("CHECK ((cardinality(tags) <= %d))", domain.MaxTags)},
		{"knowledge", "knowledge_confidence_check",
			fmt.Sprintf("CHECK (((confidence >= %d) AND (confidence <= %d)))", domain.MinConfidence, domain.MaxConfidence)},
		{"knowledge", "knowledge_kind_check", "CHECK ((kind = ANY (ARRAY[" + strings.Join(kinds, ", ") + "])))"},
		{"orgs", "orgs_name_check", length("name", tenancy.MaxOrgNameChars)},
		{"agents", "agents_name_check", length("name", tenancy.MaxAgentNameChars)},
		{"tasks", "tasks_title_check", length("title", tenancy.MaxTaskTitleChars)},
		{"audit_events", "audit_events_name_check", length("name", tenancy.MaxAuditName)},
	} {
		var def string
		err := pool.QueryRow(context.Background(), `
			SELECT pg_get_constraintdef(oid) FROM pg_constraint
			WHERE conrelid = $1::regclass AND conname = $2 AND contype = 'c'`, tc.table, tc.constraint).Scan(&def)
		if err != nil {
			t.Errorf("%s.%s: %v", tc.table, tc.constraint, err)
			continue
		}
		if def != tc.want {
			t.Errorf("%s.%s is\n\t%s\nthe Go limits say\n\t%s", tc.table, tc.constraint, def, tc.want)
		}
	}
}
