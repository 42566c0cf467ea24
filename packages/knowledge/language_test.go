package knowledge_test

import (
	"slices"
	"testing"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/errs"
)

func TestSetTextSearchConfigRebuildsOneOrgsIndex(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.filler(t, b.alice, 3)
	cats := b.store(t, b.alice, "Cats", "The cats were running around the servers.")
	other := b.store(t, b.eve, "Cats", "The cats were running around the servers.")
	b.indexAll(t)
	if got, _ := b.fullText(t, b.bob, "cat run"); !slices.Equal(got, []uuid.UUID{cats}) {
		t.Fatalf("english stems: want %v, got %v", cats, got)
	}

	// Bad names change nothing.
	_, err := b.ops.Operations().SetTextSearchConfig(b.ctx, b.org, "klingon")
	wantCode(t, err, errs.CodeInvalidArgument, "config")
	_, err = b.ops.Operations().SetTextSearchConfig(b.ctx, uuid.New(), "simple")
	wantCode(t, err, errs.CodeNotFound, "org")
	if st, _ := b.ops.Operations().SearchIndexStatus(b.ctx, b.org); st.TextSearchConfig != "english" || st.Indexed != 4 || st.Queued != 0 {
		t.Fatalf("status after refused changes: %+v", st)
	}

	n, err := b.ops.Operations().SetTextSearchConfig(b.ctx, b.org, "simple")
	if err != nil || n != 4 {
		t.Fatalf("set simple: %d %v", n, err)
	}
	// Queued entries are still found by words (the tail), with the new analysis.
	if got, _ := b.fullText(t, b.bob, "cats"); !slices.Equal(got, []uuid.UUID{cats}) {
		t.Fatalf("while rebuilding: want %v, got %v", cats, got)
	}
	b.indexAll(t)
	st, err := b.ops.Operations().SearchIndexStatus(b.ctx, b.org)
	if err != nil || st.TextSearchConfig != "simple" || st.Indexed != 4 || st.Queued != 0 {
		t.Fatalf("status after rebuild: %+v %v", st, err)
	}
	// 'simple' neither stems nor drops stop words.
	if got, _ := b.fullText(t, b.bob, "cat run"); len(got) != 0 {
		t.Fatalf("simple must not stem: %v", got)
	}
	if got, _ := b.fullText(t, b.bob, "cats were"); !slices.Equal(got, []uuid.UUID{cats}) {
		t.Fatalf("simple: want %v, got %v", cats, got)
	}
	// The other org keeps its own configuration and index.
	if got, _ := b.fullText(t, b.eve, "cat run"); !slices.Equal(got, []uuid.UUID{other}) {
		t.Fatalf("the other org changed: %v", got)
	}
	if st, _ := b.ops.Operations().SearchIndexStatus(b.ctx, b.other); st.TextSearchConfig != "english" {
		t.Fatalf("the other org's configuration: %+v", st)
	}
}
