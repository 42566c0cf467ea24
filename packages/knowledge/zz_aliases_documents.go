package knowledge

import "github.com/agentfleet/orchestrator/packages/knowledge/documents"

// What the apps and tests read of package documents, re-exported: the
// limits and words of documents and uploads in parts.

const DefaultDocumentKind = documents.DefaultDocumentKind
const DefaultMaxStagedBytes = documents.DefaultMaxStagedBytes
const FormatHTML = documents.FormatHTML
const FormatMarkdown = documents.FormatMarkdown
const FormatText = documents.FormatText
const MaxDocumentBytes = documents.MaxDocumentBytes
const MaxDocumentSections = documents.MaxDocumentSections
const MaxSectionChars = documents.MaxSectionChars
const MaxStagedUploads = documents.MaxStagedUploads
const MaxUploadBytes = documents.MaxUploadBytes
const MaxUploadPartBytes = documents.MaxUploadPartBytes
const SectionChanged = documents.SectionChanged
const SectionKept = documents.SectionKept
const SectionNew = documents.SectionNew
const UploadTTL = documents.UploadTTL
