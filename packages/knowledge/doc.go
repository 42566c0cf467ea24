// Package knowledge is the facade of the knowledge module: what the MCP
// server, the task runners (Go callers in the monorepo), the worker and the
// operators' CLI call. It composes the capability packages below it and
// adds no rule of its own:
//
//   - Service: the agents' calls (store, search, supersede, correct, get,
//     list, forget, relations, documents and uploads, task links,
//     completions), each a one-line delegation that puts the caller's org
//     in the context once (data.AsOrg) and calls one capability;
//   - Operations (Service.Operations): the operators' calls (purge, export,
//     import, statistics, an org's relation types, the search index's
//     language, a model switch's coverage and end);
//   - Maintenance (NewMaintenance): the worker's passes;
//   - reexports.go: the capabilities' types and limits under the names the
//     apps use (knowledge.Entry is domain.Entry).
//
// Below it (docs/architecture.md, "The map"): documents, transfer and
// erasure; entries (store with the duplicate check, supersede, correct,
// get, task links); search (hybrid search fused by evidence-weighted
// Reciprocal Rank Fusion, lists, hops, budgets); relations, maintenance and
// outbox; cluster (the Citus-only operations); domain (the shared types,
// limits and validation) and internal/data (the one way to the data).
// Nothing below imports this package.
//
// Every call takes the caller's org explicitly; an id of another org behaves
// exactly like an id that does not exist. Errors are *errs.Error values with a
// stable Code, mapped to the transport at the edge.
package knowledge
