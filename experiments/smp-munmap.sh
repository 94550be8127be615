#!/bin/sh
# munmap shootdowns against the number of CPUs sharing the process (issue 41, the POWER4
# thread's second SMP scenario): a program of T threads each mapping, touching and
# unmapping 256 KiB 8 times, traced once per T, replayed on machines of 1..8 CPUs under
# the x86 policy (IPIs to the CPUs running the process), per-CPU ASID slots, and ARM64's
# broadcast. Prints one row per (T, CPUs, policy): munmaps, shootdowns, IPIs, broadcasts,
# flushes of each kind and first-level TLB misses. Usage: experiments/smp-munmap.sh [XLAT] [DIR]
set -eu
XLAT=${1:-target/release/xlat}
DIR=${2:-$(mktemp -d)}
cc -O2 -pthread -o "$DIR/smp-munmap" "$(dirname "$0")/smp-munmap.c"
printf 'threads cpus policy munmaps shootdowns ipis broadcasts page_flushes space_flushes l1_misses\n'
for t in 1 2 4 8; do
  "$XLAT" trace -o "$DIR/t$t.xlt" -- "$DIR/smp-munmap" "$t" 8 >/dev/null 2>&1
  for c in 1 2 4 8; do
    for policy in ipi per-cpu broadcast; do
      case $policy in
        ipi) set -- ;;
        per-cpu) set -- --set os.asids=per-cpu ;;
        broadcast) set -- --set os.shootdown=broadcast ;;
      esac
      "$XLAT" sim -m skylake --set cpus=$c "$@" -t "$DIR/t$t.xlt" --json "$DIR/r.json" >/dev/null
      python3 - "$DIR/r.json" "$t" "$c" "$policy" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["runs"][0]["report"]
c = r.get("cpus") or {}
l1 = sum(l["misses"] for l in r["tlb_levels"] if l["name"] == r["tlb_levels"][0]["name"])
print(sys.argv[2], sys.argv[3], sys.argv[4], r["os"]["munmaps"], c.get("shootdowns", 0),
      c.get("ipis", 0), c.get("broadcasts", 0), r["flushes"]["page"], r["flushes"]["asid"], l1)
PY
    done
  done
done
