package main

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// The notes agents store: short, as most agent notes are (a title of 4-8
// words, a body of one to four sentences, 15-70 words), English-like text
// of engineering topics with a long tail of identifiers. Note i is the same
// in every run.
var (
	stopWords = strings.Fields(`the of and to a in is it that for on with as was be by this are at from or an
		but not have has we when which if all can will so there after before then also only into than more each`)
	generalWords = strings.Fields(`use run set change check fix need make keep start stop fail work add remove
		update read write call return send wait retry restart deploy test build time value case way step part
		number size limit default new old first last next same different small large slow fast high low long
		error problem issue cause result reason request response client server service team user data file
		line log message job task queue worker process memory disk cpu load rate count total peak spike drop
		config setting option flag parameter version release upgrade rollback migration schema table column
		connection pool timeout deadline budget quota alert incident outage degraded healthy monitor metric`)
	topicWords = [][]string{
		strings.Fields(`postgres vacuum autovacuum index btree replica wal checkpoint transaction deadlock planner statistics analyze bloat`),
		strings.Fields(`kubernetes pod node deployment kubelet namespace ingress helm container image readiness liveness probe scheduler`),
		strings.Fields(`redis cache eviction ttl keyspace sentinel cluster pubsub stream persistence snapshot pipeline lua maxmemory`),
		strings.Fields(`token oauth scope jwt session cookie password credential rotation expiry refresh issuer audience signature`),
		strings.Fields(`dns tls certificate proxy balancer socket packet bandwidth firewall route handshake nginx envoy upstream`),
		strings.Fields(`embedding vector cosine similarity hnsw recall rerank chunk tokenizer model inference batch gpu dimension`),
		strings.Fields(`terraform module provider state plan apply drift workspace backend lockfile variable output resource`),
		strings.Fields(`kafka topic partition offset consumer producer broker rebalance lag retention compaction replication acks`),
		strings.Fields(`golang goroutine channel mutex context panic recover interface generics module vendor gofmt race pprof`),
		strings.Fields(`python virtualenv pip wheel asyncio await coroutine pytest fixture mypy typing poetry uvicorn fastapi`),
		strings.Fields(`ci pipeline runner artifact cache job matrix workflow action secret trigger stage gitlab github jenkins`),
		strings.Fields(`prometheus scrape exporter histogram quantile counter gauge label cardinality alertmanager grafana promql`),
		strings.Fields(`payment invoice refund charge currency stripe webhook idempotency ledger settlement subscription billing`),
		strings.Fields(`linux kernel systemd cgroup namespace oom swap inode filesystem mount ext4 xfs journal syslog ulimit`),
		strings.Fields(`agent planner tool prompt completion context window memory retrieval orchestrator handoff fleet supervisor`),
	}
	idPrefixes = strings.Fields(`err max min db api auth cache queue retry conn pool worker http grpc pg redis job index shard lease`)
	idSuffixes = strings.Fields(`timeout reset refused size count limit backoff idle open closed ready failed ttl depth lag ratio`)
)

// zipf picks an index of a list of n words, earlier ones more often.
func zipf(r *rand.Rand, n int) int {
	x := r.Float64()
	return min(n-1, int(float64(n)*x*x*x))
}

func identifier(r *rand.Rand) string {
	switch r.IntN(3) {
	case 0:
		return idPrefixes[r.IntN(len(idPrefixes))] + "_" + idSuffixes[r.IntN(len(idSuffixes))]
	case 1:
		return fmt.Sprintf("%s-%d.internal", idPrefixes[r.IntN(len(idPrefixes))], r.IntN(200))
	default:
		return fmt.Sprintf("INC-%d", 1000+r.IntN(50000))
	}
}

// note is the title, body and tags of note i.
func note(i int) (title, body string, tags []string) {
	r := rand.New(rand.NewPCG(uint64(i), 37))
	topic, second := r.IntN(len(topicWords)), r.IntN(len(topicWords))
	word := func(stop, general float64) string {
		x := r.Float64()
		switch {
		case x < stop:
			return stopWords[zipf(r, len(stopWords))]
		case x < stop+general:
			return generalWords[zipf(r, len(generalWords))]
		case x < 0.97:
			t := topic
			if r.IntN(5) == 0 {
				t = second
			}
			return topicWords[t][zipf(r, len(topicWords[t]))]
		default:
			return identifier(r)
		}
	}
	tw := make([]string, 4+r.IntN(5))
	for k := range tw {
		tw[k] = word(0.1, 0.35)
	}
	var sb strings.Builder
	n := 15 + r.IntN(56)
	for n > 0 {
		m := min(n, 6+r.IntN(13))
		for k := range m {
			w := word(0.45, 0.30)
			if k == 0 {
				w = strings.ToUpper(w[:1]) + w[1:]
			} else {
				sb.WriteByte(' ')
			}
			sb.WriteString(w)
		}
		sb.WriteString(". ")
		n -= m
	}
	tags = []string{topicWords[topic][0]}
	return strings.Join(tw, " "), strings.TrimSpace(sb.String()), tags
}

// query is what an agent would ask about note i: two or three words of
// its title.
func query(i int) string {
	title, _, _ := note(i)
	w := strings.Fields(title)
	r := rand.New(rand.NewPCG(uint64(i), 41))
	n := min(len(w), 2+r.IntN(2))
	s := r.IntN(len(w) - n + 1)
	return strings.Join(w[s:s+n], " ")
}
