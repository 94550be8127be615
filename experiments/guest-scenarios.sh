#!/usr/bin/env bash
# The seeds' scenarios on real compiles in the Debian guest (issue 40):
#  1. zlib's `configure && make libz.a` on one vCPU (the seeds' uniprocessor compile), run
#     through the BAT scenario (ppc604, Dougan et al. §5.1: TLB and hash-table misses with
#     the kernel mapped by a BAT or by PTEs) and the pinned-kernel scenario (mpc855t, the 8xx
#     seed: a pinned 8 MiB kernel entry or none), each with the seed's metric;
#  2. the same build as a multi-process load, `make -j2` on two vCPUs: CPU changes and the
#     kernel's TLB shootdowns recorded, replayed on skylake (one TLB for both CPUs).
# Needs what experiments/guest-compile.sh needs (mmdebstrap, a deb-src line).
# Usage: experiments/guest-scenarios.sh [XLAT] [DIR]
set -euo pipefail
xlat=$(realpath "${1:-target/release/xlat}")
dir=$(realpath -m "${2:-$(mktemp -d)}")
mkdir -p "$dir/dl" "$dir/src"
if ! ls "$dir"/dl/zlib_*.orig.tar.* >/dev/null 2>&1; then
  (cd "$dir/dl" && apt-get source --download-only zlib) ||
    { echo "apt-get source zlib failed: add a deb-src line (see experiments/guest-compile.sh)" >&2; exit 1; }
fi
rm -rf "$dir/src"/* && tar -xf "$dir"/dl/zlib_*.orig.tar.* -C "$dir/src"
src=$(basename "$(ls -d "$dir"/src/*/ | head -1)")
build() { echo "cd $src && ./configure --static >/dev/null && make -s $1 CFLAGS='-O0 -D_LARGEFILE64_SOURCE=1' libz.a && ls -l libz.a"; }

echo "== 1. make libz.a, one vCPU"
[ -s "$dir/make1.xlt" ] ||
  time "$xlat" trace --system --image debian --copy-in "$dir/src" -o "$dir/make1.xlt" -- "$(build '')"
"$xlat" trace --info "$dir/make1.xlt" | grep -E "^events|^refs|^file bytes"
for s in bat-kernel pinned-kernel; do
  echo
  echo "== scenario $s on the compile"
  "$xlat" scenario run "$s" --trace "$dir/make1.xlt" | sed -n '/^metric/,$p'
done

echo
echo "== 2. make -j2 libz.a, two vCPUs"
[ -s "$dir/make2.xlt" ] ||
  time "$xlat" trace --system --smp 2 --image debian --copy-in "$dir/src" -o "$dir/make2.xlt" -- "$(build -j2)"
"$xlat" trace --info "$dir/make2.xlt" | grep -E "^events|^refs|^  cpu|^  shootdown|^  switch|^file bytes"
"$xlat" sim -m skylake -t "$dir/make2.xlt" --json "$dir/make2.json" > "$dir/make2.txt"
python3 - "$dir/make2.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["runs"][0]["report"]
o = r["os"]
print(f"skylake: {r['refs']['total']:,} refs, {o.get('cpu_changes', 0):,} CPU changes, "
      f"{o['context_switches']:,} context switches, {o.get('shootdowns', 0):,} shootdowns "
      f"asking {o.get('shootdown_targets', 0):,} CPUs in all, "
      f"{r['walks']['walks']:,} walks")
PY
