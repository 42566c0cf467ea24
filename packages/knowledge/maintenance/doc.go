// Package maintenance keeps the knowledge tables searchable, out of the
// agents' way: the lexical indexer (the queue knowledge_index_queue moved
// into knowledge_postings and the org's statistics, sql/index_batch.sql),
// the tables' upkeep (vacuum and analyze when due, the duplicate-check
// keys entries lack), the HNSW indexes (the space's and a large org's
// own), a model switch's backfill, cut-over and finish, the expiry of
// uploads, and the org counters' folding (CompactCounts, which erasure and
// import call too). It also checks the configured embedder against the
// vectors stored, at the apps' start (CheckEmbeddingSpace), and answers
// the operators' reads and settings of what it keeps: Stats, the search
// index status and an org's text search configuration.
//
// It sits on layer L1: above domain, internal/data and cluster (the
// Citus-only operations it delegates the shards' upkeep, an org's
// isolation and the indexer's batch on a cluster to), below the
// capabilities that call its passes or its counters (erasure, transfer),
// and it imports none of them nor the facade. It owns no cache; what it
// needs of search (readying a new connection: WarmConn) comes in as a
// function (Options.Warm).
package maintenance
