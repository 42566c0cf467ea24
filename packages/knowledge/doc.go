// Package knowledge is the domain library of the knowledge module: store
// (with the duplicate check), hybrid search (vector + full text + title,
// fused by evidence-weighted Reciprocal Rank Fusion: search/rrf.go), supersession
// with a transitive head cache and cycle detection, correction, listing,
// forgetting and purge, typed relations, task links, export and import, and
// the org statistics. Every rule of the SPEC for the MCP tools lives here,
// so the MCP app and the task runners (Go callers in the monorepo) get the
// same behaviour.
//
// Every call takes the caller's org explicitly; an id of another org behaves
// exactly like an id that does not exist. Errors are *errs.Error values with a
// stable Code, mapped to the transport at the edge.
package knowledge
