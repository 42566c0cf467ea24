#!/usr/bin/env bash
# verify.sh: gofmt, go vet and staticcheck over the whole workspace.
# staticcheck is pinned in tools/go.mod, as task and sqlc are.
set -euo pipefail
cd "$(dirname "$0")/.."
unformatted=$(gofmt -l $(git ls-files '*.go'; git ls-files --others --exclude-standard '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:" >&2
  echo "$unformatted" >&2
  exit 1
fi
go vet work
go tool staticcheck work
echo "verify: gofmt, go vet and staticcheck clean"
