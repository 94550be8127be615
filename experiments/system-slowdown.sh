#!/usr/bin/env bash
# System-mode capture slowdown: the same command in the same guest, timed inside the guest
# (busybox `time`, guest clock = host time under TCG), without and with the system plugin.
# Usage: experiments/system-slowdown.sh [XLAT] ['shell command']
# (XLAT: default target/optimized/xlat, from cargo build --profile optimized)
# Needs a built guest (any `xlat trace --system` run builds it; $XLAT_GUEST_CACHE honoured).
set -euo pipefail
xlat=${1:-target/optimized/xlat}
cmd=${2:-dd if=/dev/zero of=/tmp/f bs=4k count=4096}
cache=${XLAT_GUEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/xlat/guest}
guest=$(dirname "$(ls "$cache"/*/kallsyms | head -1)")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
b64=$(printf 'time sh -c %q' "$cmd" | base64 -w0)
echo "guest $guest"
echo "command: $cmd"
t0=$(date +%s.%N)
plain=$(qemu-system-x86_64 -accel tcg -cpu qemu64 -smp 1 -m 256M -display none -monitor none \
  -no-reboot -net none -serial stdio -kernel "$guest/vmlinux" -initrd "$guest/initrd.gz" \
  -append "console=ttyS0 nokaslr nopti panic=-1 quiet cryptomgr.notests xlat.cmd=$b64" </dev/null 2>&1 | tr -d '\r')
t1=$(date +%s.%N)
traced=$("$xlat" trace --system -o "$out/slowdown.xlt" -- "time sh -c '$cmd'" 2>&1)
t2=$(date +%s.%N)
real() { sed -n 's/^real[ \t]*\([0-9]*\)m \?\([0-9.]*\)s$/\1 \2/p' | awk '{print $1*60+$2}' | tail -1; }
a=$(echo "$plain" | real); b=$(echo "$traced" | real)
echo "in the guest, the command: plain ${a} s, traced ${b} s: slowdown $(awk -v a="$a" -v b="$b" 'BEGIN{printf "%.1f", b/a}')x"
echo "whole run (boot, command, power off): plain $(awk -v x="$t0" -v y="$t1" 'BEGIN{printf "%.1f", y-x}') s, xlat trace --system $(awk -v x="$t1" -v y="$t2" 'BEGIN{printf "%.1f", y-x}') s"
echo "$traced" | grep '^xlat:' || true
