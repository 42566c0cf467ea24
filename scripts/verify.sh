#!/usr/bin/env bash
# verify.sh: gofmt and go vet over the whole workspace.
set -euo pipefail
cd "$(dirname "$0")/.."
unformatted=$(gofmt -l $(git ls-files '*.go'; git ls-files --others --exclude-standard '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:" >&2
  echo "$unformatted" >&2
  exit 1
fi
go vet work
echo "verify: gofmt and go vet clean"
