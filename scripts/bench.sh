#!/usr/bin/env bash
# bench.sh runs the benchmarks of every module that has them and prints their
# figures (custom metrics such as p50/p95/p99 and recall@10 come from
# b.ReportMetric). Sizes are set by the environment variables each benchmark
# documents (e.g. KNOWLEDGE_BENCH_SIZES).
set -euo pipefail
cd "$(dirname "$0")/.."
pkgs=$(go list -f '{{if .TestGoFiles}}{{.ImportPath}}{{end}}{{if .XTestGoFiles}} {{.ImportPath}}{{end}}' work | tr ' ' '\n' | sort -u)
bench_pkgs=()
for p in $pkgs; do
  dir=$(go list -f '{{.Dir}}' "$p")
  if grep -qs '^func Benchmark' "$dir"/*_test.go; then
    bench_pkgs+=("$p")
  fi
done
echo "bench: ${bench_pkgs[*]}"
go test -run '^$' -bench . -benchtime "${BENCHTIME:-1x}" -timeout 60m "${bench_pkgs[@]}"
