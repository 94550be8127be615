#!/usr/bin/env bash
# Writes one JSON report per (machine variant x workload) into DIR, for diffing the
# simulator's counts before and after a performance change (the test
# `crates/xlat-sim/tests/snapshot.rs` checks a summary of such runs on every `cargo test`):
#   scripts/exactness-snapshot.sh /tmp/before; (change); scripts/exactness-snapshot.sh /tmp/after
#   diff -r /tmp/before /tmp/after && echo identical
set -euo pipefail
out=${1:?usage: exactness-snapshot.sh DIR}
root=$(cd "$(dirname "$0")/.." && pwd)
xlat=${XLAT:-$root/target/release/xlat}
mdir=$root/crates/xlat-sim/machines
mkdir -p "$out/machines"
# Variants of the default machine that exercise other code paths.
sk=$mdir/skylake.toml
sed 's/inclusion = "non-inclusive"/inclusion = "inclusive"/' "$sk" >"$out/machines/sk-inclusive.toml"
sed 's/^asid_bits = 12/asid_bits = 12\nprefetch_buffer = 8/' "$sk" >"$out/machines/sk-prefetch.toml"
sed 's/^memory_cycles = 250/memory_cycles = 250\ndata_refs = true/' "$sk" >"$out/machines/sk-datarefs.toml"
sed 's/^thp = "never"/thp = "always"/' "$sk" >"$out/machines/sk-thp.toml"
for p in tree-plru fifo random; do
  # Tree-PLRU needs power-of-two ways: a 1024x16 STLB in that variant.
  sed -e "s/entries = 1536, ways = 12/entries = 1024, ways = 16/" \
    -e "s/ways = \([0-9]*\), sizes/ways = \1, replacement = \"$p\", sizes/" "$sk" >"$out/machines/sk-$p.toml"
done
# Every preset (hashed and nested included), then the variants.
machines=("$mdir"/*.toml "$out"/machines/*.toml)
workloads=(
  "stride:footprint=2MiB,refs=200K"
  "chase:footprint=64MiB,refs=300K"
  "gups:footprint=512MiB,refs=300K"
  "sparse:region=1GiB,step=2MiB,base=0x40000000"
  "forkexit:footprint=4MiB,iterations=20,child_touch=16"
  "code:pages=64"
)
i=0
for m in "${machines[@]}"; do
  for w in "${workloads[@]}"; do
    i=$((i + 1))
    name=$(basename "$m" .toml)-${w%%:*}
    "$xlat" sim --machine "$m" --workload "$w" --json "$out/$name.json" >/dev/null
    sed -i '/"seconds":/d' "$out/$name.json"
  done
done
echo "$i reports in $out"
