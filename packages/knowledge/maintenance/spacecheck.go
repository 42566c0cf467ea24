package maintenance

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentfleet/orchestrator/db"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/vecspace"
)

// StoredSpace is a space some stored vectors are of.
type StoredSpace struct {
	vecspace.Space
	Orgs int64 // orgs holding vectors of it
}

// CheckEmbeddingSpace compares the configured embedder with the vectors
// stored, at the start of the MCP server and the worker. When vectors are
// stored and none is of the configured model and width, it is a
// *SpaceMismatchError: search would compare the new queries with none of
// them (a typo in the model's name, a changed width, another server
// behind the provider's URL) and find nothing by meaning until every org
// is re-embedded. allowChange accepts it, for a deliberate change
// followed by `ctl reembed`; once vectors of the new space are stored the
// check passes without it. The other spaces stored next to the configured
// one (a re-embed under way) are returned, for a warning. It reads the
// spaces with a loose index scan: milliseconds, whatever the table's size.
// When they cannot be read from every shard before ctx's deadline, the
// error is ErrSpacesUnread.
func CheckEmbeddingSpace(ctx context.Context, pool *pgxpool.Pool, e embed.Embedder, allowChange bool) ([]StoredSpace, error) {
	want := vecspace.Of(e)
	if err := want.Validate(); err != nil {
		return nil, err
	}
	rows, err := sqlc.New(pool).EmbeddingSpaces(ctx)
	if err != nil {
		// The deadline's error is the server's cancellation (57014) or
		// pgx's own, depending on who noticed first.
		if db.ShardUnanswered(err) || errors.Is(ctx.Err(), context.DeadlineExceeded) || pgconn.Timeout(err) {
			return nil, fmt.Errorf("%w: %w", ErrSpacesUnread, err)
		}
		return nil, fmt.Errorf("reading the stored vectors' models: %w", err)
	}
	var others []StoredSpace
	found := false
	for _, r := range rows {
		sp := StoredSpace{vecspace.Space{Model: r.Model, Dims: int(r.Dims)}, r.Orgs}
		if sp.Space == want {
			found = true
			continue
		}
		others = append(others, sp)
	}
	if found || len(others) == 0 || allowChange {
		return others, nil
	}
	return others, &SpaceMismatchError{Want: want, Stored: others}
}

// ErrSpacesUnread is CheckEmbeddingSpace's error when the stored vectors'
// models could not be read from every shard in time: on a Citus cluster a
// worker down or hung (the read visits every shard), or the read past its
// deadline. It says nothing of the configuration; an app starts without
// the check and runs it again later (knowledgeenv.CheckDatabase), since the
// orgs of the workers that answer can be served meanwhile.
var ErrSpacesUnread = errors.New("the stored vectors' models could not be read from every shard")

// SpaceMismatchError is CheckEmbeddingSpace's refusal: vectors are stored
// and none is of the configured space. The apps word it with the settings
// to change (knowledgeenv).
type SpaceMismatchError struct {
	Want   vecspace.Space // the configured embedder's
	Stored []StoredSpace  // what is stored instead
}

// SameModel says whether the configured model is stored at another width
// (the width is the setting to look at), rather than another model.
func (e *SpaceMismatchError) SameModel() bool {
	for _, o := range e.Stored {
		if o.Model == e.Want.Model {
			return true
		}
	}
	return false
}

func (e *SpaceMismatchError) Error() string {
	stored := make([]string, len(e.Stored))
	for i, o := range e.Stored {
		stored[i] = fmt.Sprintf("%s in %d org(s)", o.Space, o.Orgs)
	}
	return fmt.Sprintf("the configured embeddings are %s, but the stored vectors are %s: "+
		"search compares vectors of one model and width only and would find nothing by meaning",
		e.Want, strings.Join(stored, ", "))
}
