package entries_test

import (
	"testing"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
)

func TestTaskLinks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	task := b.mkTask(t, b.org)
	foreignTask := b.mkTask(t, b.other)
	a := b.store(t, b.alice, "a", "a")
	c := b.store(t, b.alice, "c", "c")
	foreign := b.store(t, b.eve, "f", "f")
	runner := domain.Caller{OrgID: b.org} // a task runner without an agent

	l1, err := b.svc.LinkTask(b.ctx, runner, a, domain.TaskRef{TaskID: task, Kind: domain.LinkReferences})
	if err != nil {
		t.Fatal(err)
	}
	l2, err := b.svc.LinkTask(b.ctx, b.alice, a, domain.TaskRef{TaskID: task, Kind: domain.LinkReferences})
	if err != nil || *l2 != *l1 {
		t.Fatalf("a duplicate link is idempotent: %+v %+v %v", l1, l2, err)
	}
	if _, err := b.svc.LinkTask(b.ctx, b.alice, c, domain.TaskRef{TaskID: task, Kind: domain.LinkProduced}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.Supersede(b.ctx, b.alice, a, c); err != nil {
		t.Fatal(err)
	}

	all, err := b.svc.TaskKnowledge(b.ctx, runner, task, "")
	if err != nil || len(all) != 2 {
		t.Fatalf("%+v %v", all, err)
	}
	if !all[0].Superseded || *all[0].HeadID != c {
		t.Fatalf("superseded linked entry must name its head: %+v", all[0])
	}
	prod, err := b.svc.TaskKnowledge(b.ctx, runner, task, domain.LinkProduced)
	if err != nil || len(prod) != 1 || prod[0].ID != c {
		t.Fatalf("%+v %v", prod, err)
	}
	empty, err := b.svc.TaskKnowledge(b.ctx, runner, b.mkTask(t, b.org), "")
	if err != nil || empty == nil || len(empty) != 0 {
		t.Fatalf("%+v %v", empty, err)
	}

	// Bad input and org isolation.
	_, err = b.svc.LinkTask(b.ctx, runner, a, domain.TaskRef{TaskID: task, Kind: "made"})
	wantCode(t, err, errs.CodeInvalidArgument, "taskRef.kind")
	_, err = b.svc.LinkTask(b.ctx, runner, uuid.Nil, domain.TaskRef{TaskID: task, Kind: domain.LinkProduced})
	wantCode(t, err, errs.CodeInvalidArgument, "knowledgeId")
	_, err = b.svc.LinkTask(b.ctx, runner, a, domain.TaskRef{TaskID: foreignTask, Kind: domain.LinkProduced})
	wantCode(t, err, errs.CodeNotFound, "taskRef.taskId")
	_, err = b.svc.LinkTask(b.ctx, runner, foreign, domain.TaskRef{TaskID: task, Kind: domain.LinkProduced})
	wantCode(t, err, errs.CodeNotFound, "knowledgeId")
	_, err = b.svc.TaskKnowledge(b.ctx, runner, foreignTask, "")
	wantCode(t, err, errs.CodeNotFound, "taskId")
	_, err = b.svc.TaskKnowledge(b.ctx, runner, task, "made")
	wantCode(t, err, errs.CodeInvalidArgument, "kind")
	if n := b.count(t, "SELECT count(*) FROM task_knowledge"); n != 2 {
		t.Fatalf("%d links", n)
	}
	e, err := b.svc.Get(b.ctx, b.bob, a)
	if err != nil || len(e.TaskLinks) != 1 {
		t.Fatalf("%+v %v", e, err)
	}
}
