#!/usr/bin/env bash
# server-figures.sh: the server's hot paths, measured with the Go
# benchmarks of the packages that serve them, the same way every time, so
# two revisions can be compared.
#
#   ingest     records/s and volumes/s from one agent over real gRPC and
#              mutual TLS into a real store (SQLite and PostgreSQL):
#              batches of 100 and 1000 probe records, and geometry
#              snapshots of 8 volumes that each change the verdicts
#   scrape     one /metrics scrape over a store of 10,000 volumes (SQLite):
#              cached, after an agent reported, after evaluator passes that
#              judged 10% or all volumes, after the cache expired
#   inventory  the inventory API over HTTP at VOLUMES volumes seeded through
#              the ingest service (SQLite and PostgreSQL): a filtered page
#              of 100, the cached /summary, and the first /summary right
#              after a change (p50/p99 per request)
#
# Usage:
#   bench/server-figures.sh [RAW]          run everything; the raw `go test`
#                                          output goes to RAW (default
#                                          bench/results/server-<UTC time>.txt),
#                                          then the table is printed
#   bench/server-figures.sh --table RAW    the table of a saved run
#   bench/server-figures.sh --compare OLD NEW
#                                          benchstat OLD NEW (pinned below,
#                                          through `go run`), and the medians
#                                          side by side with the change in %
#
# Environment (defaults in brackets): COUNT [5] runs of every benchmark;
# VOLUMES [20000] inventory volumes; INGEST_BENCHTIME [2s];
# SCRAPE_BENCHTIME [5x]; INVENTORY_BENCHTIME [100x] requests per page and
# summary run; CHANGE_BENCHTIME [10x] changes per after-change run;
# NICE [10] niceness of the benchmarks; PKGS [ingest scrape inventory]
# which parts to run. PostgreSQL comes from internal/lab/pgtest (Debian's
# binaries, or PLUMBLINE_TEST_POSTGRES_DSN).
#
# Compare only runs made with the same settings on the same machine, and
# look at the load averages recorded in the raw files (# uptime lines).
set -euo pipefail
cd "$(dirname "$0")/.."

BENCHSTAT=golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da

COUNT=${COUNT:-5}
VOLUMES=${VOLUMES:-20000}
INGEST_BENCHTIME=${INGEST_BENCHTIME:-2s}
SCRAPE_BENCHTIME=${SCRAPE_BENCHTIME:-5x}
INVENTORY_BENCHTIME=${INVENTORY_BENCHTIME:-100x}
CHANGE_BENCHTIME=${CHANGE_BENCHTIME:-10x}
NICE=${NICE:-10}
PKGS=${PKGS:-ingest scrape inventory}

# medians: "name<TAB>unit<TAB>median<TAB>runs" for every benchmark line of
# the files named (the -N GOMAXPROCS suffix dropped).
medians() {
	awk '
	/^Benchmark[^ \t]*[ \t]+[0-9]+[ \t]/ {
		name = $1; sub(/-[0-9]+$/, "", name)
		if (!(name in seen)) { seen[name] = 1; order[++n] = name }
		runs[name]++
		for (i = 3; i < NF; i += 2) {
			k = name SUBSEP $(i+1)
			if (!(k in cnt)) units[name] = units[name] " " $(i+1)
			vals[k, ++cnt[k]] = $i
		}
	}
	END {
		for (j = 1; j <= n; j++) {
			name = order[j]
			m = split(substr(units[name], 2), us, " ")
			for (u = 1; u <= m; u++) {
				k = name SUBSEP us[u]; c = cnt[k]
				delete a
				for (i = 1; i <= c; i++) a[i] = vals[k, i] + 0
				for (i = 2; i <= c; i++) { v = a[i]; for (h = i - 1; h >= 1 && a[h] > v; h--) a[h+1] = a[h]; a[h+1] = v }
				med = (c % 2) ? a[(c+1)/2] : (a[c/2] + a[c/2+1]) / 2
				printf "%s\t%s\t%.10g\t%d\n", name, us[u], med, runs[name]
			}
		}
	}' "$@"
}

# table prints the medians of a raw file as a Markdown table.
table() {
	medians "$1" | awk -F'\t' '
	{
		if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 }
		v[$1, $2] = $3; runs[$1] = $4
	}
	function ms(x) { return x >= 100 ? sprintf("%.0f", x) : x >= 10 ? sprintf("%.1f", x) : sprintf("%.2f", x) }
	function big(x) { return x >= 100 ? sprintf("%.0f", x) : sprintf("%.3g", x) }
	END {
		print "| benchmark | runs | median ns/op | ops/s | median figure | allocs/op |"
		print "|---|---|---|---|---|---|"
		for (j = 1; j <= n; j++) {
			b = order[j]; f = ""
			if ((b, "records/s") in v) f = big(v[b, "records/s"]) " records/s"
			if ((b, "volumes/s") in v) f = big(v[b, "volumes/s"]) " volumes/s"
			if ((b, "p99-ms") in v) f = "p50 " ms(v[b, "p50-ms"]) " ms, p99 " ms(v[b, "p99-ms"]) " ms"
			if ((b, "raid10-p99-ms") in v) f = f "; raid10 p50 " ms(v[b, "raid10-p50-ms"]) " ms, p99 " ms(v[b, "raid10-p99-ms"]) " ms"
			if (f == "" && (b, "bytes/scrape") in v) f = sprintf("%.1f MB/scrape", v[b, "bytes/scrape"] / 1e6)
			ns = v[b, "ns/op"]
			al = ((b, "allocs/op") in v) ? sprintf("%.0f", v[b, "allocs/op"]) : "—"
			printf "| %s | %d | %.0f | %s | %s | %s |\n", substr(b, 10), runs[b], ns, big(1e9 / ns), f, al
		}
	}'
}

# compare prints benchstat's comparison (when it can be fetched and built)
# and the medians side by side.
compare() {
	local old=$1 new=$2
	echo "## benchstat $old $new"
	if ! go run "$BENCHSTAT" "$old" "$new"; then
		echo "(benchstat unavailable: medians only)"
	fi
	echo
	echo "## medians (change: new against old; for ns/op, ms and allocs lower is better, for records/s, volumes/s higher)"
	echo "| benchmark | unit | old | new | change |"
	echo "|---|---|---|---|---|"
	join -t $'\t' -a 1 -a 2 -e '-' -o 0,1.2,2.2 \
		<(medians "$old" | awk -F'\t' '$2 !~ /^(B\/op|max-ms)$/ {print $1 "|" $2 "\t" $3}' | sort -t $'\t' -k1,1) \
		<(medians "$new" | awk -F'\t' '$2 !~ /^(B\/op|max-ms)$/ {print $1 "|" $2 "\t" $3}' | sort -t $'\t' -k1,1) |
		awk -F'\t' '{
			split($1, k, "|")
			d = ($2 != "-" && $3 != "-" && $2 + 0 != 0) ? sprintf("%+.1f%%", ($3 - $2) / $2 * 100) : ""
			printf "| %s | %s | %s | %s | %s |\n", substr(k[1], 10), k[2], $2, $3, d
		}'
}

note() { echo "# $*"; }

# run runs the benchmarks, appending the raw output to $1.
run() {
	local raw=$1 status=0
	inv=$(mktemp -d /tmp/plumbline-server-figures.XXXXXX)
	trap 'rm -rf "$inv"' EXIT
	{
		note "bench/server-figures.sh $(date -u +%Y-%m-%dT%H:%M:%SZ)"
		note "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"
		note "$(go version); nproc $(nproc)"
		note "COUNT=$COUNT VOLUMES=$VOLUMES INGEST_BENCHTIME=$INGEST_BENCHTIME SCRAPE_BENCHTIME=$SCRAPE_BENCHTIME INVENTORY_BENCHTIME=$INVENTORY_BENCHTIME CHANGE_BENCHTIME=$CHANGE_BENCHTIME NICE=$NICE"
	} | tee -a "$raw"
	gotest() {
		local what=$1
		shift
		note "$what" | tee -a "$raw"
		note "uptime before: $(uptime)" | tee -a "$raw"
		note "nice -n $NICE go test -run '^\$' -count $COUNT -benchmem $*" | tee -a "$raw"
		nice -n "$NICE" go test -run '^$' -count "$COUNT" -benchmem -timeout 120m "$@" 2>&1 |
			grep --line-buffered -v -e '^=== ' -e '^--- BENCH' | tee -a "$raw" || status=1
		note "uptime after: $(uptime)" | tee -a "$raw"
	}
	for p in $PKGS; do
		case $p in
		ingest)
			gotest "ingest: one agent over gRPC + mTLS into the store" \
				-bench '^Benchmark(Report|ReportGeometry)$' -benchtime "$INGEST_BENCHTIME" ./internal/server/ingest/
			;;
		scrape)
			gotest "scrape: /metrics over 10,000 volumes" \
				-bench '^BenchmarkScrape$' -benchtime "$SCRAPE_BENCHTIME" ./internal/server/exporter/
			;;
		inventory)
			# One SQLite fleet for both runs (seeded by the first);
			# PostgreSQL gets a fresh database per run.
			PLUMBLINE_BENCH_VOLUMES=$VOLUMES PLUMBLINE_BENCH_SQLITE=$inv/inventory.db \
				gotest "inventory: pages and cached summaries at $VOLUMES volumes" \
				-v -bench '^Benchmark(VolumesPage|Summary)$' -benchtime "$INVENTORY_BENCHTIME" ./internal/server/inventory/
			PLUMBLINE_BENCH_VOLUMES=$VOLUMES PLUMBLINE_BENCH_SQLITE=$inv/inventory.db \
				gotest "inventory: the first summary after a change at $VOLUMES volumes" \
				-v -bench '^BenchmarkSummaryAfterChange$' -benchtime "$CHANGE_BENCHTIME" ./internal/server/inventory/
			;;
		*)
			echo "server-figures.sh: unknown part $p (ingest, scrape, inventory)" >&2
			return 2
			;;
		esac
	done
	return $status
}

case ${1:-} in
-h | --help)
	sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
	;;
--table)
	table "${2:?usage: server-figures.sh --table RAW}"
	;;
--compare)
	compare "${2:?usage: server-figures.sh --compare OLD NEW}" "${3:?usage: server-figures.sh --compare OLD NEW}"
	;;
*)
	raw=${1:-bench/results/server-$(date -u +%Y%m%dT%H%M%SZ).txt}
	mkdir -p "$(dirname "$raw")"
	status=0
	run "$raw" || status=$?
	echo
	echo "raw output: $raw"
	table "$raw"
	exit $status
	;;
esac
