// Package erasure erases entries for good: Forget, an agent's call
// (forget_knowledge: one entry, or a document with its sections, leaving a
// tombstone), and Purge, an operator's (ctl purge: an entry, an agent's
// entries or a whole org's, in batches of purgeBatch). Both erase alike
// (eraseLocked): the rows, their task links, supersession edges and
// relations, their postings and their share of the org's index
// statistics, their place in the indexer's queue, the document rows that
// name them, their upload receipts, the quota they used, and the store's
// idempotence records in Redis that name them; chains are repaired
// (planRelink).
//
// Tables written: knowledge and every table keyed by an entry
// (knowledge_supersessions, task_knowledge, knowledge_relations,
// knowledge_postings, knowledge_term_stats, knowledge_search_stats,
// knowledge_index_queue, the document and upload tables),
// knowledge_tombstones (Forget writes them; package internal/tombstone
// reads them, for get and for a forget of a forgotten entry). It holds no
// cache.
//
// It sits above the entries and documents it erases and calls neither: it
// needs domain, internal/data, internal/idem (the records' keys), the
// tombstone read and maintenance's folding of the org counters (a purge
// folds them at once, so no counter keyed by an erased tag survives).
//
// Report (ctl erasure-report) is the proof of an erasure: it scans every
// table of the schema, read from the catalogue, and the product's Redis
// keys (RedisPatterns) for a text or an entry's id, title, body fragments
// and own words, and says where a copy remains. It writes nothing.
//
// Every method's ctx carries the org erased in (data.AsOrg); the facade
// (package knowledge) puts it there once per call.
package erasure
