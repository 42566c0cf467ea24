// Package documents owns the documents of an org: store_document (a
// document entry whose body is a table of contents, and one entry per
// section, each PART_OF the document), the replacement of a live document
// by its source in one transaction (unchanged sections kept, changed ones
// superseded, removed ones retired), and the uploads in parts that end in
// one (document_upload_start, _append, _finish).
//
// Tables: knowledge_documents and knowledge_sections (a document's mark
// and its sections' positions), knowledge_document_tokens (the
// clientTokens of documents), knowledge_document_uploads and
// knowledge_document_upload_parts (the staged parts). It writes the
// document's and sections' entries in knowledge and their supersessions,
// and makes the PART_OF relations through package relations (LinkParts,
// UnlinkParts). It holds no cache.
//
// It sits at the top of the capabilities because a document is entries
// and relations written together: it uses relations and the shared
// internal packages (data, sqlc, docsplit, simkeys), and nothing below
// uses it. Reading documents (a hit's document, a section's document in
// get, the list of a document's sections) is search's; erasing them
// (forget, purge) is erasure's and the expiry of uploads maintenance's,
// each reading these tables itself.
//
// Every method's ctx carries the caller's org (data.AsOrg); the facade
// (package knowledge) puts it there once per call.
package documents
