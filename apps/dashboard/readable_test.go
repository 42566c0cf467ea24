package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"
	"github.com/hibiken/asynqmon"

	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/jobs"
	"github.com/agentfleet/orchestrator/packages/tenancy"
	"github.com/agentfleet/orchestrator/packages/testenv"
)

// Every patch of readable.go finds its place in the asynqmon this module
// requires; an upgrade that moves one fails here, not silently in an
// operator's browser.
func TestUIPatchesApply(t *testing.T) {
	t.Parallel()
	mon := asynqmon.New(asynqmon.Options{RootPath: "/", RedisConnOpt: asynq.RedisClientOpt{Addr: "127.0.0.1:1"}})
	defer mon.Close()
	pg, err := buildPage(mon, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(pg.ui.missed) > 0 {
		t.Fatalf("patches that found nothing to change in %s: %v", pg.ui.path, pg.ui.missed)
	}
	for _, want := range []string{`(e){return e}`, `label:"Not completed"`} {
		if !strings.Contains(string(pg.ui.script), want) {
			t.Errorf("patched script lacks %q", want)
		}
	}
	if !strings.Contains(string(pg.html), "pre-wrap") {
		t.Error("index lacks the readable style sheet")
	}
}

// enqueue adds a batch task of the given org to the embeddings queue and
// returns its id.
func enqueue(t *testing.T, r *testenv.Redis, org uuid.UUID, n int) string {
	t.Helper()
	var js []knowledge.EmbeddingJob
	for range n {
		js = append(js, knowledge.EmbeddingJob{OrgID: org, EntryID: uuid.New(), Generation: 1})
	}
	b, _ := json.Marshal(jobs.BatchPayload{Jobs: js})
	c := asynq.NewClient(asynq.RedisClientOpt{Addr: r.Options.Addr, DB: r.DB})
	defer c.Close()
	info, err := c.Enqueue(asynq.NewTask(jobs.TypeEmbedBatch, b), asynq.Queue(jobs.Queue), asynq.Retention(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return info.ID
}

// completeOne runs one task to completion, kept by asynq for an hour as
// the worker's batches are.
func completeOne(t *testing.T, r *testenv.Redis) {
	t.Helper()
	opt := asynq.RedisClientOpt{Addr: r.Options.Addr, DB: r.DB}
	c := asynq.NewClient(opt)
	defer c.Close()
	if _, err := c.Enqueue(asynq.NewTask("test:done", nil), asynq.Queue(jobs.Queue), asynq.Retention(time.Hour)); err != nil {
		t.Fatal(err)
	}
	srv := asynq.NewServer(opt, asynq.Config{Queues: map[string]int{jobs.Queue: 1}, Concurrency: 1, LogLevel: asynq.FatalLevel})
	if err := srv.Start(asynq.HandlerFunc(func(context.Context, *asynq.Task) error { return nil })); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	insp := asynq.NewInspector(opt)
	defer insp.Close()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if q, err := insp.GetQueueInfo(jobs.Queue); err == nil && q.Completed == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the task did not complete in 20 s")
		}
	}
}

// getJSON reads an API answer of the dashboard as ops:s3cret.
func getJSON(t *testing.T, u string, v any) time.Duration {
	t.Helper()
	start := time.Now()
	code, body := get(t, u, "ops", "s3cret")
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %.300s", u, code, body)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("GET %s: %v: %.300s", u, err, body)
	}
	return time.Since(start)
}

type queueSnapshot struct {
	Queue     string `json:"queue"`
	Size      int    `json:"size"`
	Pending   int    `json:"pending"`
	Completed int    `json:"completed"`
}

// The queue counts leave out the completed tasks asynq keeps: one
// pending task and one completed one make a queue of one, in the list of
// queues and in the queue's own answer.
func TestQueueCountsLeaveOutCompleted(t *testing.T) {
	t.Parallel()
	base, r, _ := startFull(t, map[string]string{"DASHBOARD_USER": "ops", "DASHBOARD_PASSWORD": "s3cret"})
	completeOne(t, r)
	enqueue(t, r, uuid.New(), 2)
	var list struct{ Queues []queueSnapshot }
	getJSON(t, base+"api/queues", &list)
	if len(list.Queues) != 1 {
		t.Fatalf("queues: %+v", list.Queues)
	}
	if q := list.Queues[0]; q.Size != 1 || q.Pending != 1 || q.Completed != 1 {
		t.Errorf("api/queues: %+v, want size 1 (the pending task), completed 1", q)
	}
	var one struct{ Current queueSnapshot }
	getJSON(t, base+"api/queues/"+jobs.Queue, &one)
	if q := one.Current; q.Size != 1 || q.Completed != 1 {
		t.Errorf("api/queues/%s: %+v, want size 1", jobs.Queue, q)
	}
	// A task list carries its queue's counts too (the queue's page shows them).
	var tasks struct{ Stats queueSnapshot }
	getJSON(t, base+"api/queues/"+jobs.Queue+"/pending_tasks", &tasks)
	if q := tasks.Stats; q.Size != 1 || q.Completed != 1 {
		t.Errorf("api/queues/%s/pending_tasks: stats %+v, want size 1", jobs.Queue, q)
	}
}

type taskList struct {
	Tasks []struct {
		ID      string `json:"id"`
		Payload string `json:"payload"`
	} `json:"tasks"`
}

// A task's payload names its org beside the whole id, from the database.
func TestPayloadNamesTheOrg(t *testing.T) {
	t.Parallel()
	d := testenv.Postgres(t)
	org, err := tenancy.New(d.Pool).CreateOrg(context.Background(), "Acme Fleet")
	if err != nil {
		t.Fatal(err)
	}
	base, r, _ := startFull(t, map[string]string{"DASHBOARD_USER": "ops", "DASHBOARD_PASSWORD": "s3cret", "DATABASE_URL": d.AppURL()})
	id := enqueue(t, r, org.ID, 3)
	// The names are read within a short deadline and, missed, read again
	// 5 s later (names.go): on a loaded machine the first read, which
	// opens the connection, can miss it, so the page is read again until
	// the name shows, for up to 30 s.
	want := "org Acme Fleet (" + org.ID.String() + ")"
	var l taskList
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Second) {
		l = taskList{}
		getJSON(t, base+"api/queues/"+jobs.Queue+"/pending_tasks", &l)
		if len(l.Tasks) != 1 || l.Tasks[0].ID != id {
			t.Fatalf("tasks: %+v, want the one enqueued (%s)", l.Tasks, id)
		}
		if strings.Contains(l.Tasks[0].Payload, want) || time.Now().After(deadline) {
			break
		}
	}
	if !strings.Contains(l.Tasks[0].Payload, want) {
		t.Errorf("payload %q lacks %q", l.Tasks[0].Payload, want)
	}
}

// A database that does not answer costs the dashboard one short deadline
// every few seconds, not an answer: the tasks are listed with their org
// ids alone, and the outage is logged once.
func TestPayloadWithoutTheDatabase(t *testing.T) {
	t.Parallel()
	// A server that accepts connections and never answers: the worst
	// case, worse than a refused connection.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	base, r, out := startFull(t, map[string]string{"DASHBOARD_USER": "ops", "DASHBOARD_PASSWORD": "s3cret",
		"DATABASE_URL": "postgres://knowledge_app@" + ln.Addr().String() + "/knowledge?sslmode=disable&connect_timeout=10"})
	org := uuid.New()
	enqueue(t, r, org, 1)
	enqueue(t, r, uuid.New(), 1)
	for i := range 3 {
		var l taskList
		took := getJSON(t, base+"api/queues/"+jobs.Queue+"/pending_tasks", &l)
		if len(l.Tasks) != 2 {
			t.Fatalf("tasks: %+v", l.Tasks)
		}
		if !strings.Contains(l.Tasks[0].Payload+l.Tasks[1].Payload, "org "+org.String()) {
			t.Errorf("payloads %+v lack the org id", l.Tasks)
		}
		if limit := 3 * time.Second; took > limit {
			t.Errorf("listing %d took %v with the database silent (limit %v)", i, took, limit)
		}
	}
	if n := strings.Count(out.String(), "org names unavailable"); n != 1 {
		t.Errorf("the outage was logged %d times, want once:\n%s", n, out.String())
	}
}
