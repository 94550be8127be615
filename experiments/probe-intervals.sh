#!/usr/bin/env bash
# Issue 39's check of `xlat probe tlb` on a shared VM: three probe runs (each level's
# effective capacity as an interval) beside an independent pointer chase that shares no
# code with the probe (experiments/tlb-knee.c: the excess of a random one-line-per-page
# chase over a dense control, per footprint). Compare the L1 knee (the first footprint with
# an excess) and the L2 ramp with the intervals.
# Usage: experiments/probe-intervals.sh [XLAT]
set -euo pipefail
xlat=${1:-target/release/xlat}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cc -O2 -o "$dir/tlb-knee" "$(dirname "$0")/tlb-knee.c"
for i in 1 2 3; do
  echo "== xlat probe tlb, run $i"
  "$xlat" probe tlb 2>/dev/null | grep -E '^- shared with|^\| L[12] DTLB'
done
echo "== independent chase, L1 range (pages, random ns, control ns, excess ns)"
"$dir/tlb-knee" 48 100 1.03
echo "== independent chase, L2 range"
"$dir/tlb-knee" 1024 12000 1.06
