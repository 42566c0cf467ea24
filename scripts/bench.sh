#!/usr/bin/env bash
# bench.sh runs the benchmarks of every module that has them and prints their
# figures (custom metrics such as p50/p95/p99 and recall@10 come from
# b.ReportMetric). One package at a time (-p 1), so no benchmark shares the
# machine with another. The default run takes a few minutes on 2 cores.
#
# Sizes are set by the environment variables each benchmark documents
# (docs/benchmarks.md): KNOWLEDGE_BENCH_SIZES (default 10000,100000),
# KNOWLEDGE_BENCH_TABLE, KNOWLEDGE_BENCH_SAMPLES, KNOWLEDGE_BENCH_KEEP,
# KNOWLEDGE_BENCH_REUSE, KNOWLEDGE_BENCH_EXPLAIN. The target scale (an org of
# 100,000 entries in a table of 1,000,000 rows; about 35 minutes to load,
# index and search on 2 cores, 17 GB of disk) is opt-in:
#
#   KNOWLEDGE_BENCH_SIZES=100000 KNOWLEDGE_BENCH_TABLE=1000000 KNOWLEDGE_BENCH_KEEP=1 \
#     BENCH_TIMEOUT=0 BENCH_PKGS=./packages/knowledge/ go tool task bench
#
# BENCH_PKGS (default: every package with benchmarks) and BENCH_RUN (the
# -bench pattern, default .) narrow the run; BENCHTIME (default 1x) and
# BENCH_TIMEOUT (default 60m; 0 for none) are passed to go test.
set -euo pipefail
cd "$(dirname "$0")/.."
bench_pkgs=()
if [[ -n "${BENCH_PKGS:-}" ]]; then
  read -r -a bench_pkgs <<<"$BENCH_PKGS"
else
  pkgs=$(go list -f '{{if .TestGoFiles}}{{.ImportPath}}{{end}}{{if .XTestGoFiles}} {{.ImportPath}}{{end}}' work | tr ' ' '\n' | sort -u)
  for p in $pkgs; do
    dir=$(go list -f '{{.Dir}}' "$p")
    if grep -qs '^func Benchmark' "$dir"/*_test.go; then
      bench_pkgs+=("$p")
    fi
  done
fi
echo "bench: ${bench_pkgs[*]}"
echo "bench: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
go test -p 1 -run '^$' -bench "${BENCH_RUN:-.}" -benchtime "${BENCHTIME:-1x}" -timeout "${BENCH_TIMEOUT:-60m}" "${bench_pkgs[@]}"
echo "bench: done, load average $(cut -d' ' -f1-3 /proc/loadavg)"
