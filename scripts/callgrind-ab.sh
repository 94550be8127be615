#!/usr/bin/env bash
# Instructions per simulated reference of xlat binaries under callgrind (exact and steady,
# unlike wall clock on a shared VM; no hardware counters needed). Each case runs at two
# lengths and the difference is divided by the extra references, so start-up is excluded:
#   scripts/callgrind-ab.sh ./old-xlat ./target/optimized/xlat
# Cases: stride, gups, chase on skylake, gups on ppc604 and zen4-kvm (CASES= to override,
# `machine|workload-without-refs`).
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: callgrind-ab.sh BINARY..." >&2; exit 2; }
command -v valgrind >/dev/null || { echo "needs valgrind (apt-get install valgrind)" >&2; exit 2; }
cases=${CASES:-"skylake|stride:footprint=64MiB skylake|gups:footprint=1GiB skylake|chase:footprint=256MiB ppc604|gups:footprint=256MiB zen4-kvm|gups:footprint=1GiB"}
short=${SHORT:-100000}
long=${LONG:-300000}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ir() { # binary machine workload refs
  valgrind --tool=callgrind --callgrind-out-file="$tmp/out" "$1" sim --machine "$2" \
    --workload "$3,refs=$4" >/dev/null 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
  sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$tmp/err"
}
printf "%-34s" "case"
for b in "$@"; do printf " %16s" "$(basename "$(dirname "$b")")/$(basename "$b")"; done
echo
for c in $cases; do
  m=${c%%|*}
  w=${c#*|}
  printf "%-34s" "$m ${w%%:*}"
  for b in "$@"; do
    a=$(ir "$b" "$m" "$w" "$short")
    z=$(ir "$b" "$m" "$w" "$long")
    printf " %16s" "$(python3 -c "print(f'{($z - $a) / ($long - $short):.2f}')")"
  done
  echo
done
echo "instructions per reference (callgrind Ir, ($long-ref run - $short-ref run) / $((long - short)))"
