// Package entries owns one entry's life as an agent and a task runner see
// it: the store (store_knowledge: the insert transaction with its quota
// unit and task edge, the duplicate check, the idempotence of a client
// token), the supersession and the correction of an entry
// (supersede_knowledge), its whole read (the knowledge://{id} resource:
// the entry, its chain, task links, relation summary, the document of a
// section, or the tombstone of a forgotten entry), the read by source, and
// the task links (LinkTask, TaskKnowledge).
//
// Tables it writes: knowledge (the insert, superseded_by and head_id),
// knowledge_supersessions, task_knowledge (the task links), and a unit of the org's
// quota (org_quotas) per stored entry. Outside Postgres it owns the
// store's idempotence protocol in Redis (idempotence.go; the records'
// format and key scheme are internal/idem's, which erasure also reads)
// and hands committed entries to the embeddings pipeline (Enqueue). The
// duplicate check's word statement is sql/similar_candidates.sql, with
// the keys of internal/simkeys. It holds no cache.
//
// It sits above search (the duplicate check ranks new text by search's
// vector list, with the model that serves the org; Get names a section's
// document with it) and relations (Get's summary), and below documents,
// whose sections are entries written with their own insert
// (ErrTokenTaken is the answer both inserts give to a taken client
// token). Every method's ctx carries the caller's
// org (data.AsOrg); the facade (package knowledge) puts it there once per
// call.
package entries
