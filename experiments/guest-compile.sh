#!/usr/bin/env bash
# The seeds' kernel compile in small, under a real kernel: zlib (Debian's source package, a
# real multi-file C project) configured and built with its own configure and Makefile
# (`make libz.a`) inside the Debian guest (`xlat trace --system --image debian`), traced with
# the kernel, then replayed on every preset; on the ppc604 the idle task's zombie reclaim and
# the kernel's BAT (Dougan et al.), on the mpc855t the pinned 8 MiB kernel entry against none
# (the 8xx seed's /proc/tlbmiss).
# Needs: mmdebstrap (the guest image) and a deb-src line for `apt-get source zlib`, e.g.
#   echo 'deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main' \
#     > /etc/apt/sources.list.d/src.list && apt-get update
# Usage: experiments/guest-compile.sh [XLAT] [DIR] [CFLAGS]   (default CFLAGS -O0: a trace of
# ~2 G references; -O2 is ~4x longer to capture and replay)
set -euo pipefail
xlat=$(realpath "${1:-target/release/xlat}")
dir=$(realpath -m "${2:-$(mktemp -d)}")
cflags=${3:--O0}
mkdir -p "$dir/dl" "$dir/src"
if ! ls "$dir"/dl/zlib_*.orig.tar.* >/dev/null 2>&1; then
  (cd "$dir/dl" && apt-get source --download-only zlib) ||
    { echo "apt-get source zlib failed: add a deb-src line (see the top of $0)" >&2; exit 1; }
fi
tar -xf "$dir"/dl/zlib_*.orig.tar.* -C "$dir/src"
src=$(basename "$(ls -d "$dir"/src/*/ | head -1)")
cmd="cd $src && ./configure --static >/dev/null && make -s CFLAGS='$cflags -D_LARGEFILE64_SOURCE=1' libz.a && ls -l libz.a"
echo "== xlat trace --system --image debian --copy-in zlib -- $cmd"
time "$xlat" trace --system --image debian --copy-in "$dir/src" -o "$dir/make.xlt" -- "$cmd"
"$xlat" trace --info "$dir/make.xlt" > "$dir/info.txt"
grep -E "^events|^  idle|^file bytes" "$dir/info.txt"
echo "programs exec'd (count, name):"
sed -n 's/.*exec 0: //p' "$dir/info.txt" | sort | uniq -c | sort -rn | head -12
echo
echo "== replay on every preset"
set --
for m in $("$xlat" machines | awk '{print $1}'); do set -- "$@" -m "$m"; done
"$xlat" sim "$@" -t "$dir/make.xlt" --csv "$dir/make.csv" > "$dir/all.txt" 2>&1 || { tail "$dir/all.txt"; exit 1; }
python3 - "$dir/make.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
print("| machine | references | L1 ITLB misses | L1 DTLB misses | walks | time model (s) |")
print("|---|---|---|---|---|---|")
for r in rows:
    g = lambda k: r.get(k) or "-"
    print(f"| {r['machine']} | {int(r['refs']):,} | {g('L1_i_misses')} | {g('L1_d_misses')} | {int(r['walks']):,} | {g('seconds')} |")
PY
echo
echo "== ppc604: idle reclaim and the kernel's BAT"
"$xlat" sim -m ppc604 -t "$dir/make.xlt" 2>/dev/null | grep -E "BAT hits|idle:|^idle"
"$xlat" machines mpc855t |
  sed -e 's/^name = "mpc855t"/name = "mpc855t-unpinned"/' -e 's/^entries = 28/entries = 32/' \
      -e 's/^lockdown = 4/lockdown = 0/' -e '/^\[\[tlb.pinned\]\]/,/^$/d' > "$dir/mpc855t-unpinned.toml"
for m in mpc855t "$dir/mpc855t-unpinned.toml"; do
  echo
  echo "== $(basename "$m" .toml): as /proc/tlbmiss"
  "$xlat" sim -m "$m" -t "$dir/make.xlt" 2>/dev/null | grep -E "as /proc/tlbmiss|^  L1 +[id] "
done
