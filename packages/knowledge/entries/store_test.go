package entries_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/idem"
)

func TestStoreValidation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	task := b.mkTask(t, b.org)
	ok := domain.StoreInput{Title: "t", Body: "b"}
	with := func(f func(*domain.StoreInput)) domain.StoreInput {
		in := ok
		f(&in)
		return in
	}
	seventeen := make([]string, 17)
	for i := range seventeen {
		seventeen[i] = "t" + strings.Repeat("x", i)
	}
	cases := []struct {
		name  string
		in    domain.StoreInput
		field string
	}{
		{"empty title", with(func(in *domain.StoreInput) { in.Title = "" }), "title"},
		{"blank title", with(func(in *domain.StoreInput) { in.Title = " \t\n" }), "title"},
		{"title 201 chars", with(func(in *domain.StoreInput) { in.Title = strings.Repeat("é", 201) }), "title"},
		{"title NUL", with(func(in *domain.StoreInput) { in.Title = "a\x00b" }), "title"},
		{"title bad UTF-8", with(func(in *domain.StoreInput) { in.Title = "a\xffb" }), "title"},
		{"empty body", with(func(in *domain.StoreInput) { in.Body = "" }), "body"},
		{"body 32001 chars", with(func(in *domain.StoreInput) { in.Body = strings.Repeat("ж", 32001) }), "body"},
		{"body NUL", with(func(in *domain.StoreInput) { in.Body = "\x00" }), "body"},
		{"17 tags", with(func(in *domain.StoreInput) { in.Tags = seventeen }), "tags"},
		{"tag not kebab", with(func(in *domain.StoreInput) { in.Tags = []string{"ok", "fine", "go", "c++"} }), "tags[3]"},
		{"tag empty", with(func(in *domain.StoreInput) { in.Tags = []string{"  "} }), "tags[0]"},
		{"tag only dashes", with(func(in *domain.StoreInput) { in.Tags = []string{"a", "--"} }), "tags[1]"},
		{"tag trailing dash", with(func(in *domain.StoreInput) { in.Tags = []string{"abc_"} }), "tags[0]"},
		{"tag 65 chars", with(func(in *domain.StoreInput) { in.Tags = []string{strings.Repeat("a", 65)} }), "tags[0]"},
		{"tag non-ascii", with(func(in *domain.StoreInput) { in.Tags = []string{"café"} }), "tags[0]"},
		{"tag bad UTF-8", with(func(in *domain.StoreInput) { in.Tags = []string{"\xff"} }), "tags[0]"},
		{"confidence -1", with(func(in *domain.StoreInput) { in.Confidence = ptr(-1) }), "confidence"},
		{"confidence 101", with(func(in *domain.StoreInput) { in.Confidence = ptr(101) }), "confidence"},
		{"expiresAt now", with(func(in *domain.StoreInput) { in.ExpiresAt = ptr(time.Now().Add(-time.Millisecond)) }), "expiresAt"},
		{"expiresAt past", with(func(in *domain.StoreInput) { in.ExpiresAt = ptr(time.Now().Add(-time.Hour)) }), "expiresAt"},
		{"taskRef no task", with(func(in *domain.StoreInput) {
			in.TaskRef = &domain.TaskRef{Kind: domain.LinkProduced}
		}), "taskRef.taskId"},
		{"taskRef bad kind", with(func(in *domain.StoreInput) {
			in.TaskRef = &domain.TaskRef{TaskID: task, Kind: "made"}
		}), "taskRef.kind"},
		{"taskRef no kind", with(func(in *domain.StoreInput) {
			in.TaskRef = &domain.TaskRef{TaskID: task}
		}), "taskRef.kind"},
		{"nil clientToken", with(func(in *domain.StoreInput) { in.ClientToken = ptr(uuid.Nil) }), "clientToken"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := b.svc.Store(b.ctx, b.alice, tc.in)
			e := wantCode(t, err, errs.CodeInvalidArgument, tc.field)
			if e.Message == "" || !strings.HasPrefix(e.Error(), tc.field+": ") {
				t.Fatalf("error should name the field and the rule: %q", e.Error())
			}
		})
	}
	if n := b.entries(t); n != 0 {
		t.Fatalf("bad input wrote %d entries", n)
	}
	if n := b.count(t, "SELECT count(*) FROM org_quotas"); n != 0 {
		t.Fatalf("bad input touched the quota")
	}
	if _, err := b.svc.Store(b.ctx, domain.Caller{OrgID: b.org}, ok); errs.CodeOf(err) != errs.CodeInvalidArgument {
		t.Fatalf("a caller without agent must be refused, got %v", err)
	}
}

func TestStoreLimitsCountCharacters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// 200 two-byte characters are 400 bytes: allowed, the limit is in characters.
	in := domain.StoreInput{Title: strings.Repeat("é", 200), Body: strings.Repeat("😀", 32000),
		Tags: []string{strings.Repeat("a", 64)}, Confidence: ptr(0)}
	r, err := b.svc.Store(b.ctx, b.alice, in)
	if err != nil {
		t.Fatal(err)
	}
	if r.Confidence != 0 {
		t.Fatalf("confidence 0 must be kept, got %d", r.Confidence)
	}
}

func TestStoreAndGet(t *testing.T) {
	t.Parallel()
	b := setup(t)
	task := b.mkTask(t, b.org)
	exp := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
	r, err := b.svc.Store(b.ctx, b.alice, domain.StoreInput{
		Title: "Pool exhaustion", Body: "pgxpool waits when MaxConns is reached",
		Tags:      []string{" Go_Lang ", "PGX  pool", "go-lang", "a__b--c"},
		ExpiresAt: &exp, TaskRef: &domain.TaskRef{TaskID: task, Kind: domain.LinkProduced},
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.EmbeddingStatus != domain.EmbeddingPending || r.Confidence != 80 || r.Replayed {
		t.Fatalf("answer: %+v", r)
	}
	if got := strings.Join(r.Tags, ","); got != "go-lang,pgx-pool,a-b-c" {
		t.Fatalf("tags normalised to %q", got)
	}
	if r.TaskLink == nil || r.TaskLink.TaskID != task || r.TaskLink.Kind != domain.LinkProduced {
		t.Fatalf("task link: %+v", r.TaskLink)
	}
	jobs := b.enq.All()
	if len(jobs) != 1 || jobs[0] != (domain.EmbeddingJob{OrgID: b.org, EntryID: r.ID, Generation: 1}) {
		t.Fatalf("enqueued %+v", jobs)
	}
	e, err := b.svc.Get(b.ctx, b.bob, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if e.Title != "Pool exhaustion" || e.Origin != "agent" || *e.CreatedByAgentID != b.alice.AgentID ||
		!e.ExpiresAt.Equal(exp) || e.EmbeddingStatus != "pending" || e.HeadID != nil || len(e.TaskLinks) != 1 {
		t.Fatalf("entry: %+v", e)
	}
	// Org isolation: the id does not exist for another org.
	_, err = b.svc.Get(b.ctx, b.eve, r.ID)
	wantCode(t, err, errs.CodeNotFound, "id")
	_, err = b.svc.Get(b.ctx, b.alice, uuid.New())
	wantCode(t, err, errs.CodeNotFound, "id")
}

func TestStoreUnknownTaskWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	foreign := b.mkTask(t, b.other)
	for _, id := range []uuid.UUID{uuid.New(), foreign} {
		_, err := b.svc.Store(b.ctx, b.alice, domain.StoreInput{Title: "t", Body: "b",
			TaskRef: &domain.TaskRef{TaskID: id, Kind: domain.LinkReferences}})
		wantCode(t, err, errs.CodeNotFound, "taskRef.taskId")
	}
	if n := b.entries(t); n != 0 {
		t.Fatalf("%d entries written", n)
	}
	if n := b.quotaUsed(t, b.org); n != 0 {
		t.Fatalf("failed stores consumed %d quota units", n)
	}
	if len(b.enq.All()) != 0 {
		t.Fatal("failed store enqueued a job")
	}
}

func TestStoreEnqueueFailureIsNotAnError(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.enq.SetFailing(true)
	if _, err := b.svc.Store(b.ctx, b.alice, domain.StoreInput{Title: "t", Body: "b"}); err != nil {
		t.Fatalf("an enqueue failure must only be logged: %v", err)
	}
	if n := b.count(t, "SELECT count(*) FROM knowledge WHERE embedding_status = 'pending'"); n != 1 {
		t.Fatal("the pending row is the outbox and must exist")
	}
}

func TestStoreQuota(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.setQuota(t, b.org, 1)
	b.store(t, b.alice, "one", "body")
	_, err := b.svc.Store(b.ctx, b.alice, domain.StoreInput{Title: "two", Body: "body"})
	wantCode(t, err, errs.CodeQuotaExceeded, "")
	if n := b.entries(t); n != 1 {
		t.Fatalf("%d entries", n)
	}
	// Other orgs are not affected.
	if _, err := b.svc.Store(b.ctx, b.eve, domain.StoreInput{Title: "two", Body: "body"}); err != nil {
		t.Fatal(err)
	}
}

// TestStoreQuotaRace: k units left, many concurrent stores: exactly k succeed.
func TestStoreQuotaRace(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const k, callers = 7, 40
	b.setQuota(t, b.org, k)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		ok, over int
	)
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := b.svc.Store(b.ctx, b.alice, domain.StoreInput{Title: "t", Body: strings.Repeat("b", i+1)})
			mu.Lock()
			defer mu.Unlock()
			switch errs.CodeOf(err) {
			case "":
				if err == nil {
					ok++
					return
				}
			case errs.CodeQuotaExceeded:
				over++
				return
			}
			t.Errorf("unexpected error: %v", err)
		}()
	}
	wg.Wait()
	if ok != k || over != callers-k {
		t.Fatalf("%d succeeded, %d over quota; want %d and %d", ok, over, k, callers-k)
	}
	if n, used := b.entries(t), b.quotaUsed(t, b.org); n != k || used != k {
		t.Fatalf("%d entries, %d units used; want %d", n, used, k)
	}
}

func TestIdempotentReplay(t *testing.T) {
	t.Parallel()
	b := setup(t)
	task := b.mkTask(t, b.org)
	tok := uuid.New()
	in := domain.StoreInput{Title: "t", Body: "b", Tags: []string{"X"}, ClientToken: &tok,
		ExpiresAt: ptr(time.Now().Add(time.Hour)), TaskRef: &domain.TaskRef{TaskID: task, Kind: domain.LinkReferences}}
	first, err := b.svc.Store(b.ctx, b.alice, in)
	if err != nil {
		t.Fatal(err)
	}
	if ttl := b.redis.Client.TTL(b.ctx, idem.Key(b.org, b.alice.AgentID, tok)).Val(); ttl <= 50*time.Second || ttl > 60*time.Second {
		t.Fatalf("answer kept for %v, want 60 s", ttl)
	}
	again, err := b.svc.Store(b.ctx, b.alice, in)
	if err != nil {
		t.Fatal(err)
	}
	if again.ID != first.ID || !again.Replayed || first.Replayed || again.TaskLink == nil {
		t.Fatalf("replay %+v of %+v", again, first)
	}
	// Same token, other arguments: refused, naming clientToken.
	other := in
	other.Body = "c"
	_, err = b.svc.Store(b.ctx, b.alice, other)
	wantCode(t, err, errs.CodeInvalidArgument, "clientToken")
	// The same token of another agent is another key.
	if r, err := b.svc.Store(b.ctx, b.bob, domain.StoreInput{Title: "t", Body: "b", ClientToken: &tok}); err != nil || r.Replayed {
		t.Fatalf("bob's token is his own: %+v %v", r, err)
	}
	// Redis lost its keys: Postgres still answers the replay, and still
	// refuses other arguments.
	b.redis.Client.FlushDB(b.ctx)
	lost, err := b.svc.Store(b.ctx, b.alice, in)
	if err != nil || lost.ID != first.ID || !lost.Replayed || lost.TaskLink == nil {
		t.Fatalf("replay after Redis lost the key: %+v %v", lost, err)
	}
	b.redis.Client.FlushDB(b.ctx)
	_, err = b.svc.Store(b.ctx, b.alice, other)
	wantCode(t, err, errs.CodeInvalidArgument, "clientToken")
	if n, used := b.entries(t), b.quotaUsed(t, b.org); n != 2 || used != 2 {
		t.Fatalf("%d entries and %d quota units; want 2 (alice's and bob's)", n, used)
	}
	if len(b.enq.All()) != 2 {
		t.Fatal("a replay must not enqueue")
	}
}

func TestIdempotenceFailedStoreReleasesToken(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := uuid.New()
	in := domain.StoreInput{Title: "t", Body: "b", ClientToken: &tok,
		TaskRef: &domain.TaskRef{TaskID: uuid.New(), Kind: domain.LinkReferences}}
	_, err := b.svc.Store(b.ctx, b.alice, in)
	wantCode(t, err, errs.CodeNotFound, "taskRef.taskId")
	// The token is free again: a corrected call with it succeeds.
	in.TaskRef = nil
	if r, err := b.svc.Store(b.ctx, b.alice, in); err != nil || r.Replayed {
		t.Fatalf("%+v %v", r, err)
	}
}

// TestIdempotenceConcurrent: dozens of goroutines with the same token make
// exactly one row and one quota unit; the others replay or are told to retry.
func TestIdempotenceConcurrent(t *testing.T) {
	t.Parallel()
	for _, withRedis := range []bool{true, false} {
		t.Run(map[bool]string{true: "redis", false: "postgres-only"}[withRedis], func(t *testing.T) {
			t.Parallel()
			b := setup(t, func(o *testOptions) {
				if !withRedis {
					o.Redis = nil
				}
			})
			tok := uuid.New()
			const callers = 40
			var (
				wg    sync.WaitGroup
				mu    sync.Mutex
				ids   = map[uuid.UUID]int{}
				retry int
			)
			start := make(chan struct{})
			for range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					r, err := b.svc.Store(b.ctx, b.alice, domain.StoreInput{Title: "same", Body: "same", ClientToken: &tok})
					mu.Lock()
					defer mu.Unlock()
					var ke *errs.Error
					switch {
					case err == nil:
						ids[r.ID]++
					case asErr(err, &ke) && ke.Code == errs.CodeConflict && ke.Retryable && ke.Field == "clientToken":
						retry++
					default:
						t.Errorf("unexpected: %v", err)
					}
				}()
			}
			close(start)
			wg.Wait()
			if len(ids) != 1 {
				t.Fatalf("answers name %d different entries", len(ids))
			}
			if n, used := b.entries(t), b.quotaUsed(t, b.org); n != 1 || used != 1 {
				t.Fatalf("%d rows, %d quota units; want 1 and 1", n, used)
			}
			if !withRedis && retry != 0 {
				t.Fatalf("without Redis every call should wait and replay, %d were told to retry", retry)
			}
			t.Logf("%d answers, %d retryable conflicts", callers-retry, retry)
		})
	}
}

func TestIdempotenceRedisDown(t *testing.T) {
	t.Parallel()
	down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { down.Close() })
	b := setup(t, func(o *testOptions) { o.Redis = down })
	tok := uuid.New()
	in := domain.StoreInput{Title: "t", Body: "b", ClientToken: &tok}
	first, err := b.svc.Store(b.ctx, b.alice, in)
	if err != nil {
		t.Fatalf("Redis down must not fail a store: %v", err)
	}
	again, err := b.svc.Store(b.ctx, b.alice, in)
	if err != nil || again.ID != first.ID || !again.Replayed {
		t.Fatalf("%+v %v", again, err)
	}
	if n := b.entries(t); n != 1 {
		t.Fatalf("%d entries", n)
	}
}

// A store that committed but could not record its answer (Redis failing
// right after the commit, as when a Redis Cluster master stops) leaves its
// "running" marker behind: a retry is answered with the committed entry
// from Postgres, not told for the marker's lifetime that the call is still
// running.
func TestIdempotenceMarkerOfACommittedStore(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := uuid.New()
	in := domain.StoreInput{Title: "t", Body: "b", ClientToken: &tok}
	first, err := b.svc.Store(b.ctx, b.alice, in)
	if err != nil {
		t.Fatal(err)
	}
	key := idem.Key(b.org, b.alice.AgentID, tok)
	var rec map[string]any
	if err := json.Unmarshal([]byte(b.redis.Client.Get(b.ctx, key).Val()), &rec); err != nil || rec["state"] != "done" {
		t.Fatalf("the answer's record: %v %v", rec, err)
	}
	rec["state"] = "running" // the marker, as the call set it before storing
	delete(rec, "result")
	marker, _ := json.Marshal(rec)
	b.redis.Client.Set(b.ctx, key, marker, 15*time.Second)
	again, err := b.svc.Store(b.ctx, b.alice, in)
	if err != nil || again.ID != first.ID || !again.Replayed {
		t.Fatalf("a retry behind the marker of a committed store: %+v %v", again, err)
	}
	if n := b.entries(t); n != 1 {
		t.Fatalf("%d entries", n)
	}
}

func TestStoreCallerOfAnotherOrg(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// An agent id that is not an agent of the org (a token can never carry
	// one, but a task runner could pass anything).
	_, err := b.svc.Store(b.ctx, domain.Caller{OrgID: b.org, AgentID: b.eve.AgentID}, domain.StoreInput{Title: "t", Body: "b"})
	wantCode(t, err, errs.CodeForbidden, "")
	if n := b.entries(t); n != 0 {
		t.Fatal("written")
	}
	if used := b.quotaUsed(t, b.org); used != 0 {
		t.Fatal("quota consumed")
	}
	_ = context.Background
}

func asErr(err error, target **errs.Error) bool {
	e, ok := err.(*errs.Error)
	if ok {
		*target = e
	}
	return ok
}
