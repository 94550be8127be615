#!/usr/bin/env python3
"""Instructions per *marginal* reference, by component, from two callgrind runs.

Runs `xlat sim` under callgrind at two reference counts of the same workload and
subtracts them per machine instruction, so set-up and warm-up (e.g. demand faults) cancel
out. Each instruction is charged to the innermost inlined frame whose function name
contains one of the component keys; `--spills` also counts stack accesses (what
register pressure costs):

    scripts/marginal-profile.py target/optimized/xlat --machine skylake \\
        --workload 'gups:footprint=8GiB,refs={n}' --counts 8000000 10000000

Needs valgrind, addr2line and objdump; a build with debug info (`cargo build --profile
optimized`: `debug = 1`; the release profile has none). Takes a few minutes.
"""
import argparse
import collections
import re
import subprocess
import tempfile

KEYS = ("Assoc,Caches,Radix,Pwc,memo_hit,Tlbs::fill,Tlbs::probe,Workload,"
        "Sim<P>::walk,translate_past_l1,Sim<P>::run,Sim<P>::access,fault_in")


def load(path):
    """Inclusive-free instruction counts per address from a --dump-instr=yes file."""
    counts = collections.Counter()
    last = 0
    skip = False
    for line in open(path):
        if line.startswith("calls="):
            skip = True  # the next cost line is the call's inclusive cost
            continue
        if not line or not (line[0].isdigit() or line[0] in "+-*" or line.startswith("0x")):
            continue
        parts = line.split()
        s = parts[0]
        if s.startswith("0x"):
            a = int(s, 16)
        elif s.startswith("+"):
            a = last + int(s[1:])
        elif s.startswith("-"):
            a = last - int(s[1:])
        elif s == "*":
            a = last
        else:
            a = int(s)
        last = a
        if skip:
            skip = False
            continue
        if len(parts) > 1:
            counts[a] += int(parts[-1])
    return counts


def chains(binary, addrs):
    """Inlined call chain (innermost first) of each address: [(function, file:line)]."""
    out = subprocess.run(["addr2line", "-a", "-i", "-f", "-C", "-e", binary]
                         + [hex(a) for a in addrs], capture_output=True, text=True).stdout
    result, cur, lines, i = {}, None, out.split("\n"), 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("0x"):
            cur = int(line, 16)
            result[cur] = []
            i += 1
        elif line and i + 1 < len(lines):
            result[cur].append((line, lines[i + 1]))
            i += 2
        else:
            i += 1
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("binary")
    ap.add_argument("--machine", default="skylake")
    ap.add_argument("--workload", default="gups:footprint=8GiB,refs={n}")
    ap.add_argument("--counts", nargs=2, type=int, default=[8_000_000, 10_000_000])
    ap.add_argument("--keys", default=KEYS, help="comma-separated component names")
    ap.add_argument("--spills", action="store_true", help="count stack accesses too")
    ap.add_argument("--lines", type=int, default=0, help="also show the top N source lines")
    args = ap.parse_args()
    keys = args.keys.split(",")

    runs = []
    with tempfile.TemporaryDirectory() as d:
        procs = []
        for n in args.counts:
            out = f"{d}/cg.{n}"
            procs.append(subprocess.Popen(
                ["valgrind", "--tool=callgrind", "--dump-instr=yes",
                 f"--callgrind-out-file={out}", args.binary, "sim", "--machine",
                 args.machine, "--workload", args.workload.format(n=n)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            runs.append(out)
        for p in procs:
            if p.wait() != 0:
                raise SystemExit("callgrind run failed")
        a, b = load(runs[0]), load(runs[1])
    refs = float(args.counts[1] - args.counts[0])
    diff = {k: b[k] - a[k] for k in b if b[k] - a[k] > 0}
    print(f"{sum(diff.values()) / refs:.1f} instructions per marginal reference")

    asm = {}
    if args.spills:
        dump = subprocess.run(["objdump", "-d", "--no-show-raw-insn", args.binary],
                              capture_output=True, text=True).stdout
        for line in dump.split("\n"):
            m = re.match(r"\s*([0-9a-f]+):\s*(.*)", line)
            if m:
                asm[int(m.group(1), 16)] = m.group(2)
    hot = [k for k, v in diff.items() if v / refs > 0.02]
    comp, spill, where = collections.Counter(), collections.Counter(), collections.Counter()
    for addr, chain in chains(args.binary, hot).items():
        name = "other: " + (chain[-1][0][:50] if chain else "?")
        for func, _ in chain:
            k = next((k for k in keys if k in func), None)
            if k:
                name = k
                break
        c = diff[addr] / refs
        comp[name] += c
        where[chain[0][1].split("/")[-1].split(" ")[0] if chain else "?"] += c
        ins = asm.get(addr, "")
        if "(%rsp" in ins or ins.startswith(("push", "pop")):
            spill[name] += c
    for name, c in comp.most_common():
        extra = f"   stack {spill[name]:6.1f}" if args.spills else ""
        print(f"{c:8.1f}  {name}{extra}")
    for loc, c in where.most_common(args.lines):
        print(f"{c:8.1f}  {loc}")


if __name__ == "__main__":
    main()
