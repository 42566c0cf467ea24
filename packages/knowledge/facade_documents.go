package knowledge

import (
	"context"

	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
)

// StoreDocument stores a document for the caller (store_document): see
// documents.Documents.StoreDocument.
func (s *Service) StoreDocument(ctx context.Context, c domain.Caller, in domain.DocumentInput) (*domain.DocumentResult, error) {
	return s.documents.StoreDocument(s.scope(ctx, c.OrgID), c, in)
}

// UploadStart begins an upload of a document in parts for the caller
// (document_upload_start): see documents.Documents.UploadStart.
func (s *Service) UploadStart(ctx context.Context, c domain.Caller, in domain.UploadStartInput) (*domain.UploadStartResult, error) {
	return s.documents.UploadStart(s.scope(ctx, c.OrgID), c, in)
}

// UploadAppend adds a part to the caller's upload
// (document_upload_append): see documents.Documents.UploadAppend.
func (s *Service) UploadAppend(ctx context.Context, c domain.Caller, in domain.UploadAppendInput) (*domain.UploadAppendResult, error) {
	return s.documents.UploadAppend(s.scope(ctx, c.OrgID), c, in)
}

// UploadFinish stores the caller's complete upload as one document
// (document_upload_finish): see documents.Documents.UploadFinish.
func (s *Service) UploadFinish(ctx context.Context, c domain.Caller, in domain.UploadFinishInput) (*domain.DocumentResult, error) {
	return s.documents.UploadFinish(s.scope(ctx, c.OrgID), c, in)
}
