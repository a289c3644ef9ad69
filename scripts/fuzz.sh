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

# fuzz1 fuzzes one target. Go before 1.27 can fail a run that found
# nothing with a bare "context deadline exceeded" at the end of -fuzztime
# (a race in its fuzzing coordinator, go.dev/issue/75804); such a run is
# tried again, up to three times. A real failure always writes its input
# ("Failing input written to …") and is never retried.
fuzz1() {
  local pkg=$1 fn=$2 out try
  out=$(mktemp)
  for try in 1 2 3; do
    if "$GO" test -run '^$' -fuzz "^${fn}\$" -fuzztime "$fuzztime" -fuzzminimizetime 1s "./$pkg" 2>&1 | tee "$out"; then
      rm -f "$out"
      return 0
    fi
    if ! grep -q 'context deadline exceeded' "$out" || grep -q 'Failing input written to' "$out"; then
      break
    fi
    echo "fuzz: $fn: the coordinator's deadline race (go.dev/issue/75804), no input found; again ($try of 3)"
  done
  rm -f "$out"
  return 1
}

n=0
while read -r pkg fn; do
  echo "== $pkg $fn"
  fuzz1 "$pkg" "$fn"
  n=$((n + 1))
done <<<"$list"
echo "fuzz: $n targets, $fuzztime each"
