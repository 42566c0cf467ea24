package maintenance

import (
	"context"
	"fmt"

	"github.com/agentfleet/orchestrator/db"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/vecspace"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// EnsureVectorIndex makes sure the configured space's HNSW indexes (of the
// entries and of the chunks of long entries) exist and are valid: it builds it (CREATE INDEX CONCURRENTLY IF NOT EXISTS, so
// stores and searches go on) when it is missing, and drops and builds it
// again when a build was cut short. One build at a time across workers (the
// advisory lock Upkeep's per-org builds take): a worker that finds another
// building returns false at once, and Upkeep's next pass tries again. The
// worker calls it at start and on every Upkeep pass; it costs two catalog
// look-ups when the index is there. Until the index is valid, the vector
// list uses the exact scan of the org (search_candidates.sql).
func (m *Maintenance) EnsureVectorIndex(ctx context.Context) (built bool, err error) {
	defer data.WrapOp(&err, "knowledge.EnsureVectorIndex")
	names, err := m.ensureVectorIndexes(ctx)
	return len(names) > 0, err
}

// ensureVectorIndexes is EnsureVectorIndex, naming the indexes it built.
func (m *Maintenance) ensureVectorIndexes(ctx context.Context) (built []string, err error) {
	sp := vecspace.Of(m.emb)
	if err := sp.Validate(); err != nil {
		return nil, err
	}
	space := sqlc.CountSpaceEntriesParams{Model: sp.Model, Dims: int32(sp.Dims)}
	for _, ix := range []struct {
		table, name string
		elements    func(context.Context, *sqlc.Queries) (int64, error)
	}{
		{"knowledge", sp.IndexName(), func(ctx context.Context, q *sqlc.Queries) (int64, error) {
			return q.CountSpaceEntries(ctx, space)
		}},
		{"knowledge_chunks", sp.ChunkIndexName(), func(ctx context.Context, q *sqlc.Queries) (int64, error) {
			return q.CountSpaceChunks(ctx, sqlc.CountSpaceChunksParams(space))
		}},
	} {
		st, err := m.q.IndexState(ctx, ix.name)
		if err != nil {
			return built, data.MapErr(err, "")
		}
		if st.Present && st.Valid {
			continue
		}
		b, err := m.buildVectorIndex(ctx, ix.name, sp.TableIndexDDL(ix.table, ix.name, nil), sp, ix.elements)
		if err != nil {
			return built, err
		}
		if b {
			built = append(built, ix.name)
		}
	}
	return built, nil
}

// buildVectorIndex runs one index build on a connection of its own, with
// the memory the build of its elements (vectors of sp, as many as elements
// says) needs, for that connection only (vecspace.BuildMemory), dropping first an
// invalid index of that name a failed build left. It builds nothing (false)
// while another worker builds one; elements is asked only by the worker
// that builds (a count may read the table: not once a pass by every other
// worker while one builds).
func (m *Maintenance) buildVectorIndex(ctx context.Context, name, ddl string, sp vecspace.Space,
	elements func(context.Context, *sqlc.Queries) (int64, error)) (bool, error) {
	conn, err := m.data.Scoped().Acquire(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Release()
	q := sqlc.New(conn)
	locked, err := q.TryLockVectorIndexBuild(ctx)
	if err != nil {
		return false, data.MapErr(err, "")
	}
	if !locked {
		return false, nil // another worker is building one
	}
	defer q.UnlockVectorIndexBuild(context.WithoutCancel(ctx))
	// Looked at again under the lock: another worker may have built it.
	st, err := q.IndexState(ctx, name)
	if err != nil {
		return false, data.MapErr(err, "")
	}
	if st.Present && st.Valid {
		return false, nil
	}
	if st.Present {
		// An invalid index, which writes still maintain: drop it first, or
		// IF NOT EXISTS would keep it.
		if err := dropIndex(ctx, conn, name); err != nil {
			return false, fmt.Errorf("drop invalid %s: %w", name, err)
		}
	}
	n, err := elements(ctx, q)
	if err != nil {
		return false, data.MapErr(err, "")
	}
	server, err := q.MaintenanceWorkMem(ctx)
	if err != nil {
		return false, data.MapErr(err, "")
	}
	mem, capped := vecspace.BuildMemory(sp, n, server, m.cfg.VectorIndexMemory)
	log := m.log.With("index", name, "elements", n, "maintenance_work_mem_mb", mem>>20)
	if capped {
		log.Warn("vector index build: the graph does not fit in the memory allowed; the build will be several times slower",
			"needed_mb", vecspace.GraphBytes(sp, n)>>20, "allowed_mb", m.cfg.VectorIndexMemory>>20)
	} else {
		log.Info("vector index build")
	}
	if _, err := conn.Exec(ctx, fmt.Sprintf("SET maintenance_work_mem = '%dkB'", mem>>10)); err != nil {
		return false, err
	}
	defer conn.Exec(context.WithoutCancel(ctx), "RESET maintenance_work_mem")
	err = runBuild(ctx, conn.Conn(), ddl)
	if sharedMemoryShort(err) {
		// A parallel build holds its graph in one shared memory segment
		// of maintenance_work_mem, which the server's /dev/shm may not
		// have room for (a container's is 64 MB unless set). A build
		// without workers holds it in the backend's own memory: build
		// again that way, after dropping what the failed one left.
		log.Warn("vector index build: no room in the server's shared memory for a parallel build; building without parallel workers",
			"err", err)
		if err := dropIndex(ctx, conn, name); err != nil {
			return false, fmt.Errorf("drop %s after a failed parallel build: %w", name, err)
		}
		if _, err := conn.Exec(ctx, "SET max_parallel_maintenance_workers = 0"); err != nil {
			return false, err
		}
		defer conn.Exec(context.WithoutCancel(ctx), "RESET max_parallel_maintenance_workers")
		err = runBuild(ctx, conn.Conn(), ddl)
	}
	if err != nil {
		return false, fmt.Errorf("build %s: %w", name, err)
	}
	return true, nil
}

// dropIndex drops an index without blocking writes (not through sqlc: DDL
// takes no parameters), as a failed CONCURRENTLY build leaves it.
func dropIndex(ctx context.Context, db interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, name string) error {
	_, err := db.Exec(ctx, "DROP INDEX CONCURRENTLY IF EXISTS "+pgx.Identifier{name}.Sanitize())
	return err
}

// runBuild runs an index build's DDL; a test replaces it to fail a build.
var runBuild = func(ctx context.Context, conn *pgx.Conn, ddl string) error {
	_, err := conn.Exec(ctx, ddl)
	return err
}

// sharedMemoryShort says whether err is the server lacking the shared
// memory a parallel build asks for: "could not resize shared memory
// segment ... No space left on device" (disk_full, from /dev/shm) or its
// out_of_memory twin.
func sharedMemoryShort(err error) bool {
	return db.SharedMemoryShort(err)
}
