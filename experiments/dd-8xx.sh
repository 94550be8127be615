#!/usr/bin/env bash
# The seed 000 experiment (M. Tosatti, "increased translation cache footprint in v2.6",
# linux-kernel 2005): `dd` 3840 x 4 KiB from /dev/zero to a RAM file system, its `read`
# path's code pages, and its TLB misses like /proc/tlbmiss on the MPC855T (32-entry I/D
# TLBs) with and without the pinned 8 MiB kernel entry. Here the kernels are Debian's x86-64
# Linux (traced under QEMU, folded onto the 8xx's 32-bit space with the kernel image at
# KERNELBASE 0xc0000000): the footprint is each kernel's, the TLBs are the 8xx's.
# Usage: experiments/dd-8xx.sh [XLAT] [DIR] [KERNEL PACKAGE...]
#   (no package: linux-image-amd64's; e.g. linux-image-amd64 linux-image-6.12-amd64 compares two)
set -euo pipefail
xlat=${1:-target/release/xlat}
dir=${2:-$(mktemp -d)}
shift $(( $# < 2 ? $# : 2 ))
kernels=("$@")
[ ${#kernels[@]} -gt 0 ] || kernels=(linux-image-amd64)
mkdir -p "$dir"
cmd="dd if=/dev/zero of=/tmp/file bs=4k count=3840"
# The unpinned 8xx: the preset's own recipe (32 entries, no reserved ones, no pinned entry).
"$xlat" machines mpc855t |
  sed -e 's/^name = "mpc855t"/name = "mpc855t-unpinned"/' -e 's/^entries = 28/entries = 32/' \
      -e 's/^lockdown = 4/lockdown = 0/' -e '/^\[\[tlb.pinned\]\]/,/^$/d' > "$dir/mpc855t-unpinned.toml"
summary=()
for k in "${kernels[@]}"; do
  t="$dir/dd-$k.xlt"
  echo "== xlat trace --system --kernel $k -- $cmd"
  "$xlat" trace --system --kernel "$k" -o "$t" -- "$cmd"
  echo
  echo "== code pages per read(): xlat syscalls --entry read"
  "$xlat" syscalls "$t" --entry read --top 6 | tee "$dir/syscalls-$k.txt"
  row="$("$xlat" trace --info "$t" | sed -n 's/^meta *kernel = //p')"
  row+=" | $(awk '$1 == "read" { print $3 " | " $NF; exit }' "$dir/syscalls-$k.txt")"
  for m in mpc855t "$dir/mpc855t-unpinned.toml"; do
    echo
    echo "== xlat sim -m $(basename "$m" .toml) -t $(basename "$t")"
    "$xlat" sim -m "$m" -t "$t" 2>/dev/null |
      sed -n -e '/^  L1 /p' -e '/^walks/p' -e '/^privilege/,/tlbmiss/p' -e '/^ITLB misses/,/^flushes/p' |
      grep -v '^flushes' | tee "$dir/sim.txt"
    row+=" | $(awk '$1 == "L1" && $2 == "i" { print $5; exit }' "$dir/sim.txt")"
  done
  summary+=("| $row |")
  echo
done
echo "== the kernels side by side"
echo "| kernel | read: kernel code pages per call (mean) | instructions per read | mpc855t ITLB misses, pinned 8 MiB | unpinned |"
echo "|---|---|---|---|---|"
printf '%s\n' "${summary[@]}"
