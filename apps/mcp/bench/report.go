package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/agentfleet/orchestrator/apps/mcp/internal/stages"
)

// result is one series of timed calls of one server.
type result struct {
	size             int
	transport, tool  string
	state            string // the search's state; "" for stores
	target           string
	lat              []time.Duration
	stages           []stages.Record // the server's, one a timed call (this build's only)
	stagesFile       string          // where they are, once the server stopped
	skip             int             // the warm-up calls' records, first in the file
	loadFrom, loadTo string
}

func (r *result) key() string {
	k := fmt.Sprintf("%s %s", strings.TrimSuffix(r.tool, "_knowledge"), r.transport)
	if r.state != "" {
		k += " " + r.state
	}
	return k
}

// timeCalls makes n timed calls of fn on every target, the targets' calls
// alternating (which goes first changes every call), after warm untimed
// ones; with workers, only the calling target's runs (turn). The stage records are read once the servers have stopped
// (readStages).
func timeCalls(targets []*target, size int, transport, tool, state string, n, warm int, fn func(c client, i int) error) ([]*result, error) {
	name := tool + "_knowledge"
	defer resumeWorkers(targets)
	for k := range warm {
		for j, t := range targets {
			turn(targets, j)
			if err := fn(t.client, n+k); err != nil {
				return nil, fmt.Errorf("%s %s (warm-up): %w", t.name, name, err)
			}
		}
	}
	out := make([]*result, len(targets))
	for j, t := range targets {
		out[j] = &result{size: size, transport: transport, tool: name, state: state, target: t.name,
			lat: make([]time.Duration, 0, n), loadFrom: loadAvg()}
	}
	start := time.Now()
	for i := range n {
		for k := range targets {
			j := (i + k) % len(targets)
			t := targets[j]
			turn(targets, j)
			t0 := time.Now()
			if err := fn(t.client, i); err != nil {
				return nil, fmt.Errorf("%s %s %d: %w", t.name, name, i, err)
			}
			out[j].lat = append(out[j].lat, time.Since(t0))
		}
		if n >= 2000 && (i+1)%1000 == 0 {
			fmt.Printf("bench: %s over %s: %d of %d (%v)\n", name, transport, i+1, n, time.Since(start).Round(time.Second))
		}
	}
	for j, t := range targets {
		out[j].loadTo = loadAvg()
		out[j].stages = nil
		if t.clock {
			out[j].stagesFile = t.stages
			out[j].skip = warm
		}
	}
	return out, nil
}

// readStages reads the stage records of r's timed calls from its file.
func (r *result) readStages() error {
	if r.stagesFile == "" || r.stages != nil {
		return nil
	}
	f, err := os.Open(r.stagesFile)
	if err != nil {
		return fmt.Errorf("stage clock: %w (was the server built with it?)", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	seen := 0
	for sc.Scan() {
		var rec stages.Record
		if json.Unmarshal(sc.Bytes(), &rec) != nil || rec.Name != r.tool {
			continue
		}
		seen++
		if seen <= r.skip {
			continue
		}
		r.stages = append(r.stages, rec)
	}
	return sc.Err()
}

func pct(lat []time.Duration, p float64) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	s := slices.Clone(lat)
	slices.Sort(s)
	return s[int(p*float64(len(s)-1))]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d.Microseconds())/1000) }

func median(xs []int64) int64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// stageP50 is the p50 of one figure of the stage records, in ms.
func stageP50(recs []stages.Record, f func(stages.Record) int64) string {
	xs := make([]int64, len(recs))
	for i, r := range recs {
		xs[i] = f(r)
	}
	return fmt.Sprintf("%.2f", float64(median(xs))/1000)
}

func maxOf(recs []stages.Record, f func(stages.Record) int) int {
	m := 0
	for _, r := range recs {
		m = max(m, f(r))
	}
	return m
}

// printSize prints one size's figures: each series' client percentiles,
// and the stage table of this build's calls.
func printSize(size int, rs []*result, targets []*target) {
	fmt.Printf("\n%d entries: client p50 / p95 / p99 ms (load average at start -> end)\n", size)
	for _, r := range rs {
		fmt.Printf("  %-32s %-5s %s / %s / %s  (%d calls; %s -> %s)\n", r.key(), r.target, ms(pct(r.lat, .5)), ms(pct(r.lat, .95)), ms(pct(r.lat, .99)), len(r.lat), r.loadFrom, r.loadTo)
	}
	var cols []*result
	for _, r := range rs {
		if r.stagesFile == "" {
			continue
		}
		if err := r.readStages(); err != nil {
			fmt.Printf("  stages of %s: %v\n", r.key(), err)
			continue
		}
		if len(r.stages) > 0 {
			cols = append(cols, r)
		}
	}
	if len(cols) == 0 {
		return
	}
	fmt.Printf("\n%d entries, this build: p50 of each stage, ms (docs/benchmarks.md, \"MCP end to end\")\n\n", size)
	head := "| stage |"
	sep := "|---|"
	for _, c := range cols {
		head += " " + c.key() + " |"
		sep += "---|"
	}
	fmt.Println(head)
	fmt.Println(sep)
	row := func(name string, f func(c *result) string) {
		line := "| " + name + " |"
		for _, c := range cols {
			line += " " + f(c) + " |"
		}
		fmt.Println(line)
	}
	for _, s := range stages.Names() {
		row(s, func(c *result) string {
			return stageP50(c.stages, func(r stages.Record) int64 { return r.Us[s] })
		})
	}
	row("unattributed (server less the stages)", func(c *result) string {
		return stageP50(c.stages, func(r stages.Record) int64 {
			sum := int64(0)
			for _, v := range r.Us {
				sum += v
			}
			return r.ServerUs - sum
		})
	})
	row("**server, arrival to written**", func(c *result) string {
		return "**" + stageP50(c.stages, func(r stages.Record) int64 { return r.ServerUs }) + "**"
	})
	row("**client, p50**", func(c *result) string { return "**" + ms(pct(c.lat, .5)) + "**" })
	row("PostgreSQL round trips (median, max)", func(c *result) string {
		return fmt.Sprintf("%s, %d", stageP50x(c.stages, func(r stages.Record) int { return r.DBTrips }), maxOf(c.stages, func(r stages.Record) int { return r.DBTrips }))
	})
	row("Redis round trips (median, max)", func(c *result) string {
		return fmt.Sprintf("%s, %d", stageP50x(c.stages, func(r stages.Record) int { return r.RedisTrips }), maxOf(c.stages, func(r stages.Record) int { return r.RedisTrips }))
	})
	row("after the answer: PostgreSQL, Redis (median)", func(c *result) string {
		return stageP50x(c.stages, func(r stages.Record) int { return r.DBTripsAfter }) + ", " + stageP50x(c.stages, func(r stages.Record) int { return r.RedisTripsAfter })
	})
}

func stageP50x(recs []stages.Record, f func(stages.Record) int) string {
	xs := make([]int64, len(recs))
	for i, r := range recs {
		xs[i] = int64(f(r))
	}
	return fmt.Sprint(median(xs))
}

// printSummary compares the builds' p50s, series by series.
func printSummary(all []*result, targets []*target) {
	if len(targets) < 2 {
		return
	}
	fmt.Printf("\nthis build against %s (client p50 ms; ratio this/base)\n", targets[1].bin)
	by := map[string]map[string]*result{}
	var keys []string
	for _, r := range all {
		k := fmt.Sprintf("%d %s", r.size, r.key())
		if by[k] == nil {
			by[k] = map[string]*result{}
			keys = append(keys, k)
		}
		by[k][r.target] = r
	}
	for _, k := range keys {
		a, b := by[k]["this"], by[k]["base"]
		if a == nil || b == nil {
			continue
		}
		pa, pb := pct(a.lat, .5), pct(b.lat, .5)
		fmt.Printf("  %-40s this %s, base %s: %.2f\n", k, ms(pa), ms(pb), float64(pa)/float64(pb))
	}
}
