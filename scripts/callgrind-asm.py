#!/usr/bin/env python3
"""Per-instruction costs of one function from a callgrind profile, beside its disassembly:
where an inlined hot path spends its instructions (callgrind_annotate gives files and lines,
which inlining smears).

    valgrind --tool=callgrind --dump-instr=yes --callgrind-out-file=cg.out \\
        ./xlat sim -m zen4-kvm -w chase:footprint=64MiB,refs=1000000
    scripts/callgrind-asm.py cg.out ./xlat 'xlat_sim::assoc::Dynamic::fill' 1e6 [MIN]

Prints each instruction of every function whose demangled name starts with the given
prefix, with its self cost divided by the divisor (e.g. the references simulated), hiding
lines below MIN (default 0.05), then the total."""
import collections
import re
import subprocess
import sys


def costs(path, binary):
    """Self Ir per instruction address of `binary` (call lines' inclusive costs skipped)."""
    cnt = collections.Counter()
    objs, addr, skip, inbin = {}, 0, False, False
    for line in open(path):
        m = re.match(r"(c?ob)=\((\d+)\)\s*(.*)", line)
        if m:
            if m.group(3):
                objs[m.group(2)] = m.group(3)
            if m.group(1) == "ob":
                inbin = binary in objs.get(m.group(2), "")
            continue
        if line.startswith("calls="):
            skip = True
            continue
        if not line or not (line[0].isdigit() or line[0] in "+-*"):
            continue
        parts = line.split()
        a = parts[0]
        if a.startswith("0x"):
            addr = int(a, 16)
        elif a[0] in "+-":
            d = int(a[1:], 16) if a[1:].startswith("0x") else int(a[1:])
            addr += d if a[0] == "+" else -d
        if skip:
            skip = False
            continue
        if inbin and len(parts) >= 3:
            cnt[addr] += int(parts[2])
    return cnt


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    out, binary, prefix, per = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    least = float(sys.argv[5]) if len(sys.argv) > 5 else 0.05
    cnt = costs(out, binary)
    dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-C", binary],
                         capture_output=True, text=True, check=True).stdout
    on, total = False, 0
    for line in dis.splitlines():
        if line.endswith(">:"):
            on = line.split("<", 1)[1].startswith(prefix)
            if on:
                print(line)
            continue
        m = on and re.match(r"\s*([0-9a-f]+):\s*(.*)", line)
        if m:
            c = cnt.get(int(m.group(1), 16), 0)
            total += c
            if c / per >= least:
                print(f"{c / per:8.2f}  {m.group(2)[:100]}")
    print(f"total {total / per:.1f}")


main()
