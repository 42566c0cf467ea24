// Package relations owns the typed relations between the entries of one org
// and the catalogue of their types: link_knowledge, unlink_knowledge,
// list_relations, the relations get_knowledge summarises, ctl
// relation-type add, and the PART_OF relations of a document's sections.
//
// Tables: knowledge_relations (one row per relation, closed rows kept for
// as-of reads) and knowledge_relation_types (an org's own types). It reads
// knowledge itself only to lock and check a relation's ends and to name the
// other end of a relation; supersession (knowledge_supersessions) is read
// as the derived, read-only SUPERSEDES / SUPERSEDED_BY relations. It holds
// no cache: an org's catalogue is one small index range, read per call
// (the built-in types need no read at all).
//
// It sits at the bottom of the capabilities (it needs only domain and
// internal/data) because the others use its catalogue: search follows
// relations in hops (CatalogueOf, Catalogue.Resolve), transfer exports and
// imports types and relations, documents link their sections (LinkParts,
// UnlinkParts), get summarises (Summary). Erasure deletes relation rows
// with the entries and writes none.
//
// Every method's ctx carries the caller's org (data.AsOrg); the facade
// (package knowledge) puts it there once per call.
package relations
