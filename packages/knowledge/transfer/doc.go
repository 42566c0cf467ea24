// Package transfer exports an org's knowledge as JSON Lines and imports
// such a file (ctl export, ctl import; docs/operators.md): operators'
// calls, in one snapshot for an export and one transaction for an import.
//
// The file is one JSON object per line, each with a "kind": a header, then
// the org's agents (authorship), its own relation types, the tasks its
// entries are linked to, its entries oldest first, the documents among
// them and their sections (transferdocs.go), the recorded supersession
// edges, the task links, the relations (open and closed).
// Ids are kept: every key of the schema leads with org_id, so the same ids
// can live in any org of any database, and an import into another org is a
// copy, not a clash. Nothing in the file names the org or the moment of the
// export, so exporting an import gives the same bytes (tested).
//
// Not exported: tokens (secrets; an org moved elsewhere gets new ones),
// quotas (an operator's setting of the target), embedding bookkeeping
// (generations, errors). Without --vectors an imported entry is pending and
// the worker embeds it with the target's model; with them, ready entries
// keep their vector and model.
//
// Tables: it reads and writes every table of an org's knowledge (entries,
// chains, task links, relations and their types, documents and sections;
// agents and tasks it adds when the file names ones the org lacks). It
// holds no cache.
//
// It sits above relations (an import resolves relation types through the
// org's catalogue) and maintenance (an import folds the org counters at
// once) and calls neither the entries nor the documents capabilities: an
// import writes rows with COPY and batch statements, making the duplicate
// check's word keys itself (internal/simkeys), as a store would.
//
// Every method's ctx carries the org (data.AsOrg); the facade (package
// knowledge) puts it there once per call.
package transfer
