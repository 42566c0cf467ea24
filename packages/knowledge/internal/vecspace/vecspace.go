// Package vecspace names the spaces of knowledge's vectors, writes their
// HNSW indexes' DDL and sizes the memory of their builds.
//
// A vector's space is its model and width. knowledge.embedding holds
// vectors of any width from embed.MinDimensions to embed.MaxDimensions
// (db/migrations/00008_embedding_width.sql); search compares only vectors of
// the configured space, and each space has an HNSW index of its own: an
// expression index on a cast to the space's width (HNSW needs a fixed
// width), partial to the space's model and width:
//
//	CREATE INDEX CONCURRENTLY knowledge_hnsw_m_<hash> ON knowledge USING hnsw
//	    ((embedding::vector(384)) vector_cosine_ops)
//	    WHERE embedding_model = 'all-minilm' AND vector_dims(embedding) = 384
//	      AND head_id IS NULL
//
// The entries' indexes hold the heads of their chains only: a supersession
// rewrites every earlier version's row (its head_id), no update of an entry
// is HOT, and each rewritten row of a superseded version would be inserted
// into the HNSW index again, a graph search for an unchanged vector
// (db/migrations/00049_vector_heads.sql). The searches that ask for
// superseded entries rank them exactly, beside the index's heads. The
// chunks' index needs no such predicate: a supersession writes no chunk.
//
// Past 2,000 dimensions (vector's HNSW limit) the cast is to halfvec(N)
// with halfvec_cosine_ops (limit 4,000): the index holds 16-bit floats, the
// row keeps the 32-bit vector. The vector list's HNSW function orders by the
// same cast under the same filters, so the planner uses that index; a large
// org's own index (knowledge's maintenance/upkeep.go) is the same with org_id = the org
// added.
package vecspace

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
)

// Space is a vector space: an embedding model and its width.
type Space struct {
	Model string
	Dims  int
}

// Of is the space of the vectors an embedder makes.
func Of(e embed.Embedder) Space { return Space{Model: e.Model(), Dims: e.Dimensions()} }

// halfvecFrom is the width from which a space's index is on halfvec.
const halfvecFrom = 2001

func (v Space) String() string { return fmt.Sprintf("%s (%d dimensions)", v.Model, v.Dims) }

// hash names the space in index names (which are at most 63 bytes and
// cannot hold a model's name).
func (v Space) hash() string {
	h := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%d", v.Model, v.Dims)))
	return hex.EncodeToString(h[:])
}

// IndexName is the space's HNSW index over every org.
func (v Space) IndexName() string { return "knowledge_hnsw_m_" + v.hash()[:16] }

// ChunkIndexName is the space's HNSW index of the chunks of long entries
// (knowledge's outbox/chunk.go), over every org.
func (v Space) ChunkIndexName() string { return "knowledge_chunks_hnsw_m_" + v.hash()[:16] }

// OrgIndexName is the space's HNSW index of one large org (knowledge's maintenance/upkeep.go).
func (v Space) OrgIndexName(org uuid.UUID) string {
	return OrgIndexPrefix(org) + v.hash()[:8]
}

// OrgIndexesPrefix begins the name of every org's own HNSW indexes;
// OrgIndexPrefix, of one org's, whatever their space.
const OrgIndexesPrefix = "knowledge_hnsw_org_"

// OrgIndexPrefix begins the names of one org's own HNSW indexes.
func OrgIndexPrefix(org uuid.UUID) string {
	return OrgIndexesPrefix + strings.ReplaceAll(org.String(), "-", "") + "_"
}

// PairIndexesPrefix begins the name of every HNSW index of an org's
// metadata pair (knowledge's maintenance/upkeep.go); PairIndexPrefix, of
// the space's. A pair's index is named
// knowledge_pair_index_name(PairIndexPrefix, org, pair), a hash of the org
// and the pair (db/migrations/00050_pair_vector_indexes.sql): the name has
// room for neither in full.
const PairIndexesPrefix = "knowledge_hnsw_p_"

// PairIndexPrefix begins the names of the space's pairs' HNSW indexes.
func (v Space) PairIndexPrefix() string { return PairIndexesPrefix + v.hash()[:8] + "_" }

// PairIndexDDL is the CREATE INDEX of org's index of the heads of the space
// that carry the metadata pair whose hash is pair
// (knowledge_metadata_pair_keys). The predicate names the pair by its hash,
// not its value: a metadata value may be personal, and an index's
// definition is in the catalog, where no erasure of the org's rows reaches
// (a hash two pairs share only adds entries the search's filter rejects).
// knowledge_vector_hnsw writes the same clause for a pair whose index is
// valid, or no plan could use it.
//
// It indexes the vectors normalized, by inner product, an order the same
// as the cosine's: an expression and an operator no other index has, so
// that the statement walking a pair's index can be planned with no other.
// On the cosine of the cast, as the space's and the org's indexes are, the
// planner would choose among the three by costs that, on a table never
// analyzed, tie: it chose the space's index in a test.
func (v Space) PairIndexDDL(name string, org uuid.UUID, pair int64) string {
	typ, _ := v.Cast()
	opclass := "vector_ip_ops"
	if v.Dims >= halfvecFrom {
		opclass = "halfvec_ip_ops"
	}
	return fmt.Sprintf("CREATE INDEX CONCURRENTLY IF NOT EXISTS %s ON knowledge USING hnsw ((l2_normalize(embedding::%s)::%s) %s) WHERE %s AND knowledge_metadata_pair_keys(metadata) @> '{%d}'::bigint[]",
		pgx.Identifier{name}.Sanitize(), typ, typ, opclass, v.where("knowledge", &org), pair)
}

// Cast is the type the space's index is on; knowledge_vector_hnsw writes
// the same (db/migrations/00008_embedding_width.sql).
func (v Space) Cast() (typ, opclass string) {
	if v.Dims >= halfvecFrom {
		return fmt.Sprintf("halfvec(%d)", v.Dims), "halfvec_cosine_ops"
	}
	return fmt.Sprintf("vector(%d)", v.Dims), "vector_cosine_ops"
}

// IndexDDL is the CREATE INDEX of the space's index, or of an org's own
// (org non-nil). Not through sqlc: DDL takes no parameters. The model is
// written as a literal with its quotes doubled (standard_conforming_strings
// is on since PostgreSQL 9.1, so a backslash is an ordinary character); the
// width is an int and the org a uuid.UUID.
func (v Space) IndexDDL(name string, org *uuid.UUID) string {
	return v.TableIndexDDL("knowledge", name, org)
}

// TableIndexDDL is IndexDDL on knowledge or knowledge_chunks (same columns).
func (v Space) TableIndexDDL(table, name string, org *uuid.UUID) string {
	typ, opclass := v.Cast()
	return fmt.Sprintf("CREATE INDEX CONCURRENTLY IF NOT EXISTS %s ON %s USING hnsw ((embedding::%s) %s) WHERE %s",
		pgx.Identifier{name}.Sanitize(), table, typ, opclass, v.where(table, org))
}

// where is the predicate of an index of the space on table (of one org's
// rows if org is not nil).
func (v Space) where(table string, org *uuid.UUID) string {
	where := fmt.Sprintf("embedding_model = %s AND vector_dims(embedding) = %d", QuoteLiteral(v.Model), v.Dims)
	if table == "knowledge" {
		// Heads only: see the package comment.
		where += " AND head_id IS NULL"
	}
	if org != nil {
		where = fmt.Sprintf("org_id = '%s'::uuid AND ", *org) + where
	}
	return where
}

// QuoteLiteral is s as an SQL string literal (standard_conforming_strings).
func QuoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// Validate says whether vectors of the space can be stored.
func (v Space) Validate() error {
	if v.Model == "" {
		return errors.New("the embedder names no model")
	}
	if v.Dims < embed.MinDimensions || v.Dims > embed.MaxDimensions {
		return fmt.Errorf("%d dimensions: must be between %d and %d", v.Dims, embed.MinDimensions, embed.MaxDimensions)
	}
	return nil
}

// An HNSW build is fast while its graph fits in maintenance_work_mem:
// past that, pgvector writes the graph out and inserts every further
// element through the index pages, several times slower. At 1M entries of
// 768 dimensions the fixed 1 GB this build used to get held the first
// ~283,000 elements; the build then took 53-55 minutes on two vCPUs,
// against 11 with room for the whole graph (4 GB; docs/benchmarks.md,
// "Why search is built so"). An hour is an Upkeep pass's deadline, which a
// wider model would pass, leaving an index that is never built. So the
// memory is sized to the graph, up to a deployment's ceiling.
//
// GraphBytes is the memory pgvector 0.8's build takes for n elements of
// sp: per element its vector as stored in the index (vector: 8 + 4 bytes
// a dimension; halfvec: 8 + 2), the element (~130 bytes), its neighbour
// lists (2m candidates of 16 bytes on layer 0, m on the ~1/m of upper
// layers: ~560 bytes for m = 16) and allocation padding: 4d + 720 for a
// vector, 3,800 bytes at 768 dimensions, so 1 GB holds ~283,000 elements.
// Measured on the 1M-row benchmark: with 1 GB the build had fallen to a
// sixth of its pace before its 300,000th element. A parallel build takes
// a shared segment of maintenance_work_mem less 3 MB.
func GraphBytes(sp Space, n int64) int64 {
	per := int64(8 + 4*sp.Dims)
	if sp.Dims >= halfvecFrom {
		per = int64(8 + 2*sp.Dims)
	}
	return n*(per+720) + 8<<20
}

// BuildMemory is the maintenance_work_mem of a build of n elements: the
// graph (GraphBytes) plus a tenth, at least 64 MB and never less than the
// server's own setting (a deployment that gives every build more keeps
// it), at most ceiling; capped says the graph did not fit under it.
func BuildMemory(sp Space, n, server, ceiling int64) (mem int64, capped bool) {
	need := GraphBytes(sp, n) * 11 / 10
	mem = max(need, 64<<20)
	if mem > ceiling {
		mem, capped = ceiling, true
	}
	mem = max(mem, server)
	return mem, capped && mem < need
}
