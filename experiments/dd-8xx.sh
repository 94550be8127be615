#!/usr/bin/env bash
# The seed 000 experiment (M. Tosatti, "increased translation cache footprint in v2.6",
# linux-kernel 2005): `dd` 3840 x 4 KiB from /dev/zero to a RAM file system, its `read`
# path's code pages, and its TLB misses like /proc/tlbmiss on the MPC855T (32-entry I/D
# TLBs) with and without the pinned 8 MiB kernel entry. Here the kernel is Debian 12's
# x86-64 Linux 6.1 (traced under QEMU, folded onto the 8xx's 32-bit space with the kernel
# image at KERNELBASE 0xc0000000): the footprint is that kernel's, the TLBs are the 8xx's.
# Usage: experiments/dd-8xx.sh [XLAT] [DIR]
set -euo pipefail
xlat=${1:-target/release/xlat}
dir=${2:-$(mktemp -d)}
mkdir -p "$dir"
cmd="dd if=/dev/zero of=/tmp/file bs=4k count=3840"
echo "== xlat trace --system -- $cmd"
"$xlat" trace --system -o "$dir/dd.xlt" -- "$cmd"
echo
echo "== code pages per read(): xlat syscalls --entry read"
"$xlat" syscalls "$dir/dd.xlt" --entry read --top 6
# The unpinned 8xx: the preset's own recipe (32 entries, no reserved ones, no pinned entry).
"$xlat" machines mpc855t |
  sed -e 's/^name = "mpc855t"/name = "mpc855t-unpinned"/' -e 's/^entries = 28/entries = 32/' \
      -e 's/^lockdown = 4/lockdown = 0/' -e '/^\[\[tlb.pinned\]\]/,/^$/d' > "$dir/mpc855t-unpinned.toml"
for m in mpc855t "$dir/mpc855t-unpinned.toml"; do
  echo
  echo "== xlat sim -m $(basename "$m" .toml) -t dd.xlt"
  "$xlat" sim -m "$m" -t "$dir/dd.xlt" 2>/dev/null |
    sed -n -e '/^  L1 /p' -e '/^walks/p' -e '/^privilege/,/tlbmiss/p' -e '/^ITLB misses/,/^flushes/p' |
    grep -v '^flushes'
done
