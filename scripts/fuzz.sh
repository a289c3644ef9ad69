#!/usr/bin/env bash
# Runs every fuzz target of the module for FUZZTIME each (default 30s):
# `make fuzz`. The targets come from the code, not from a list kept by
# hand: the packages whose tests declare a `func Fuzz…`, each asked with
# `go test -list '^Fuzz'`, so a new target is fuzzed without an edit here.
#
#   scripts/fuzz.sh          fuzz every target, stop at the first failure
#   scripts/fuzz.sh --list   print the targets ("<package dir> <name>")
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
fuzztime=${FUZZTIME:-30s}

# targets prints "<package dir> <Fuzz name>" for every fuzz target.
targets() {
  local dir
  grep -rl --include='*_test.go' --exclude-dir=.git --exclude-dir=testdata --exclude-dir=vendor \
    -E '^func Fuzz' . | xargs -r -n1 dirname | sort -u |
  while read -r dir; do
    "$GO" test -list '^Fuzz' "$dir" | grep -E '^Fuzz' | sed "s|^|${dir#./} |"
  done
}

list=$(targets)
if [[ -z $list ]]; then
  echo "fuzz: no fuzz targets found" >&2
  exit 1
fi
if [[ ${1:-} == --list ]]; then
  printf '%s\n' "$list"
  exit 0
fi

n=0
while read -r pkg fn; do
  echo "== $pkg $fn"
  "$GO" test -run '^$' -fuzz "^${fn}\$" -fuzztime "$fuzztime" -fuzzminimizetime 1s "./$pkg"
  n=$((n + 1))
done <<<"$list"
echo "fuzz: $n targets, $fuzztime each"
