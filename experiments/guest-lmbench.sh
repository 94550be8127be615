#!/usr/bin/env bash
# lmbench's operations (fork, exec, page fault, mmap, context switch, pipe bandwidth) run by a
# small static program (experiments/guest-lmbench.c) in the busybox guest under Debian's
# kernel, each traced whole twice (N operations and none: the difference is exactly N
# operations, the program's start and the markers cancel), then replayed on several
# machines: per operation, the references, TLB misses and walks the real kernel's code paths
# make, and the time model's microseconds (pipe: MB/s).
# Usage: experiments/guest-lmbench.sh [XLAT] [DIR] [MACHINE...]
set -euo pipefail
xlat=$(realpath "${1:-target/release/xlat}")
dir=${2:-$(mktemp -d)}
shift $(( $# < 2 ? $# : 2 ))
machines=("$@")
[ ${#machines[@]} -gt 0 ] || machines=(skylake zen4 ppc604 mpc855t)
here=$(dirname "$(realpath "$0")")
mkdir -p "$dir/in"
gcc -O2 -static -o "$dir/in/lmb" "$here/guest-lmbench.c"
set --
for m in "${machines[@]}"; do set -- "$@" -m "$m"; done
for spec in fork:50 exec:50 fault:2000 mmap:200 ctx:500 pipe:64; do
  op=${spec%%:*} n=${spec#*:}
  for k in 0 "$n"; do
    "$xlat" trace --system --copy-in "$dir/in" -o "$dir/$op-$k.xlt" -- ./lmb "$op" "$k" 2>/dev/null
    "$xlat" sim "$@" -t "$dir/$op-$k.xlt" --json "$dir/$op-$k.json" >/dev/null 2>&1
  done
done
python3 - "$dir" <<'PY'
import json, sys
d = sys.argv[1]
ops = [("fork", 50), ("exec", 50), ("fault", 2000), ("mmap", 200), ("ctx", 500), ("pipe", 64)]
def runs(op, k):
    return {r["machine"]: r["report"] for r in json.load(open(f"{d}/{op}-{k}.json"))["runs"]}
def misses(r, side):
    return sum(l["misses"] for l in r["tlb_levels"][:2] if l["side"] == side and l["name"] == r["tlb_levels"][0]["name"])
print("| operation | machine | refs/op | L1 ITLB misses/op | L1 DTLB misses/op | walks/op | simulated µs/op (MB/s for pipe) |")
print("|---|---|---|---|---|---|---|")
for op, n in ops:
    a, b = runs(op, 0), runs(op, n)
    per = n * 2 if op == "ctx" else n  # lat_ctx: a round trip is two switches
    for m in b:
        x, y = a[m], b[m]
        f = lambda g: (g(y) - g(x)) / per
        refs = f(lambda r: r["refs"]["total"])
        itlb = f(lambda r: misses(r, "i"))
        dtlb = f(lambda r: misses(r, "d"))
        walks = f(lambda r: r["walks"]["walks"])
        secs = (y["time"]["seconds"] or 0) - (x["time"]["seconds"] or 0)
        t = f"{n * 64 / 1024 / secs:.0f} MB/s" if op == "pipe" else f"{secs / per * 1e6:.2f}"
        print(f"| {op} | {m} | {refs:,.0f} | {itlb:.1f} | {dtlb:.1f} | {walks:.1f} | {t} |")
PY
