package tenancy_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/errs"
)

func TestAgentByName(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	a, created, err := b.svc.AgentByName(ctx, b.org.ID, "scout", false)
	if err != nil || created || a.ID != b.agent.ID {
		t.Fatalf("existing agent: %+v created=%v err=%v", a, created, err)
	}
	if _, _, err := b.svc.AgentByName(ctx, b.org.ID, "user-123", false); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("missing agent without create: %v, want ErrNotFound", err)
	}
	if _, _, err := b.svc.AgentByName(ctx, uuid.New(), "user-123", true); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("agent of an org that does not exist: %v, want ErrNotFound", err)
	}
	if _, _, err := b.svc.AgentByName(ctx, b.org.ID, "", true); !errors.Is(err, errs.ErrInvalidArgument) {
		t.Fatalf("empty name: %v", err)
	}

	// Concurrent first sights make one agent; exactly one of them says it
	// created it.
	var wg sync.WaitGroup
	var mu sync.Mutex
	ids := map[uuid.UUID]int{}
	creates := 0
	for range 8 {
		wg.Go(func() {
			a, created, err := b.svc.AgentByName(ctx, b.org.ID, "user-123", true)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			ids[a.ID]++
			if created {
				creates++
			}
		})
	}
	wg.Wait()
	if len(ids) != 1 || creates != 1 {
		t.Fatalf("concurrent first sights: agents %v, creates %d; want one agent created once", ids, creates)
	}
	agents, err := b.svc.ListAgents(ctx, b.org.ID)
	if err != nil || len(agents) != 2 {
		t.Fatalf("agents after: %d %v", len(agents), err)
	}
}
