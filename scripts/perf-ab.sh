#!/usr/bin/env bash
# Interleaved A/B of xlat binaries on one workload with `perf stat` (user-mode cycles and
# instructions per reference; far steadier than wall clock on this VM):
#   scripts/perf-ab.sh 4 skylake ./old-xlat ./target/optimized/xlat
# W= the workload (default gups over 8 GiB, 30 M refs), R= its reference count.
# Needs `perf` with access to hardware counters (perf_event_paranoid <= 2).
set -euo pipefail
n=${1:?usage: perf-ab.sh RUNS MACHINE BINARY...}
machine=${2:?machine}
shift 2
root=$(cd "$(dirname "$0")/.." && pwd)
m=$root/crates/xlat-sim/machines/$machine.toml
[ -f "$m" ] || m=$machine
w=${W:-gups:footprint=8GiB,refs=30M}
r=${R:-30000000}
out=$(mktemp)
trap 'rm -f "$out" "$out.stat"' EXIT
for _ in $(seq "$n"); do
  for b in "$@"; do
    perf stat -x, -e cycles:u,instructions:u "$b" sim --machine "$m" --workload "$w" \
      2>"$out.stat" >/dev/null
    c=$(grep cycles "$out.stat" | cut -d, -f1)
    i=$(grep instructions "$out.stat" | cut -d, -f1)
    echo "$b $((i / r)) $((c * 10 / r))" >>"$out"
  done
done
for b in "$@"; do
  grep "^$b " "$out" | sort -k3 -n | awk -v b="$b" '{ i = $2; c[NR] = $3 / 10 }
    END { printf "%-28s %5d instr/ref  median %6.1f cyc/ref  (min %.1f max %.1f)\n",
          b, i, c[int((NR + 1) / 2)], c[1], c[NR] }'
done
