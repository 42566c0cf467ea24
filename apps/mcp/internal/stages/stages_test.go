package stages

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func records(t *testing.T, b *bytes.Buffer) []Record {
	t.Helper()
	var out []Record
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if line == "" {
			continue
		}
		var r Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

// A call's figures: overlapping round trips count once in the wall times,
// each counts as a trip, the rate limit's trips apart, and what a call does
// after its answer is written is counted apart too, in the record written
// when the next call arrives.
func TestClockAttributesOneCall(t *testing.T) {
	var buf bytes.Buffer
	rec := NewRecorder(&buf)
	rec.Arrive()
	c := rec.Current()
	ctx := With(context.Background(), c)
	if From(ctx) != c {
		t.Fatal("From does not return the clock With put in the context")
	}
	c.Name("search_knowledge")
	c.GateIn()
	c.RateLimitTrip()
	c.RunStart()
	c.IOStart(KindDB) // two statements at once
	c.IOStart(KindDB)
	time.Sleep(2 * time.Millisecond)
	c.IOEnd(KindDB)
	c.IOEnd(KindDB)
	c.IOStart(KindRedis)
	c.IOEnd(KindRedis)
	c.RunEnd()
	c.GateOut()
	rec.Written()
	if got := records(t, &buf); len(got) != 0 {
		t.Fatalf("a record before the next call's arrival: %+v", got)
	}
	c.IOStart(KindRedis) // after the answer: the queue
	c.IOEnd(KindRedis)
	rec.Arrive() // the next call
	got := records(t, &buf)
	if len(got) != 1 {
		t.Fatalf("records: %+v", got)
	}
	r := got[0]
	if r.Name != "search_knowledge" || r.DBTrips != 2 || r.RedisTrips != 2 || r.RedisTripsAfter != 1 || r.DBTripsAfter != 0 {
		t.Errorf("trips: %+v", r)
	}
	if r.Us["database"] < 2000 || r.Us["database"] > r.ServerUs {
		t.Errorf("database %d us of a call of %d us: the two statements at once count once, at least 2 ms", r.Us["database"], r.ServerUs)
	}
	var sum int64
	for _, v := range r.Us {
		sum += v
	}
	if sum > r.ServerUs+int64(len(r.Us)) { // each stage rounded down to the microsecond
		t.Errorf("stages add up to %d us, more than the call's %d us: %+v", sum, r.ServerUs, r.Us)
	}
}

// A write that answers no gated call (initialize, a list) closes nothing,
// and a nil Recorder or Clock does nothing at all.
func TestRecorderIgnoresUngatedWritesAndNil(t *testing.T) {
	var buf bytes.Buffer
	rec := NewRecorder(&buf)
	rec.Arrive()
	rec.Written() // initialize's answer
	rec.Arrive()
	rec.Close()
	if buf.Len() != 0 {
		t.Errorf("records of ungated calls: %s", buf.String())
	}
	var nilRec *Recorder
	nilRec.Arrive()
	nilRec.Written()
	nilRec.Close()
	c := nilRec.Current()
	c.Name("x")
	c.GateIn()
	c.IOStart(KindDB)
	c.IOEnd(KindDB)
	c.Add(Domain, time.Second)
	if From(With(context.Background(), c)) != nil {
		t.Error("a nil clock in the context")
	}
}
