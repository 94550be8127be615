#!/usr/bin/env python3
"""Capture and online-simulation speed against native, measured in the same run.

For each workload (gzip -9 of ~8 MB, xz -6 of ~3 MB, sort of 1M lines, a Python loop, and
`gcc -O2 -c` of a generated 150-function C file: a compile, driver, cc1 and as)
this runs: the program natively, `xlat run` (online simulation on the default machine)
and `xlat trace` (capture to a compressed .xlt), and prints each one's elapsed time and
its ratio to the native CPU time (user + sys), plus the trace's bytes per reference.

Inputs are generated deterministically (seeded) in a temporary directory.

    scripts/bench-capture.py [--xlat target/optimized/xlat] [--only gzip,xz] [--repeat 3]

Build first: cargo build --profile optimized  (xlat and the QEMU plugin, fully optimized:
the profile README's numbers use).
"""

import argparse
import os
import random
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time

WORDS = (
    "the of and to in is was that for it with as on be at by this had not are but from or "
    "have an they which one you were her all she there would their we him been has when who "
    "will more no if out so said what up its about into than them can only other new some "
    "could time these two may then do first any my now such like our over man me even most "
    "page table walk translation lookaside buffer entry miss hit kernel memory virtual"
).split()


def text(path, size, seed):
    rnd = random.Random(seed)
    out, n = [], 0
    while n < size:
        line = " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(4, 14))) + "\n"
        out.append(line)
        n += len(line)
    with open(path, "w") as f:
        f.write("".join(out)[:size])


def lines(path, count, seed):
    rnd = random.Random(seed)
    with open(path, "w") as f:
        for _ in range(count):
            f.write(f"{rnd.randrange(10**12):012d} {rnd.choice(WORDS)}\n")


def csource(path, funcs, seed):
    """A C file of `funcs` small functions (loops, switches, arithmetic) and a table of them."""
    rnd = random.Random(seed)
    out = ["#include <stddef.h>", ""]
    for i in range(funcs):
        k = [rnd.randint(1, 97) for _ in range(6)]
        out.append(
            f"long f{i}(const long *v, size_t n) {{\n"
            f"    long s = {k[0]};\n"
            f"    for (size_t j = 0; j < n; j++) {{\n"
            f"        switch ((v[j] + {k[1]}) % 5) {{\n"
            f"        case 0: s += v[j] * {k[2]}; break;\n"
            f"        case 1: s ^= v[j] << {k[3] % 13}; break;\n"
            f"        case 2: s -= (v[j] >> 2) + {k[4]}; break;\n"
            f"        case 3: s = s * 31 + j; break;\n"
            f"        default: s += (s & {k[5]}) ? 1 : -1;\n"
            f"        }}\n"
            f"    }}\n"
            f"    return s;\n"
            f"}}\n"
        )
    out.append("typedef long (*fn)(const long *, size_t);")
    out.append("fn table[] = {" + ", ".join(f"f{i}" for i in range(funcs)) + "};")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def native(cmd):
    """Runs cmd natively; returns (elapsed s, cpu s) of the child."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True)
    elapsed = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


def timed(cmd):
    t = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr}")
    return time.perf_counter() - t, p.stderr


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--xlat", default=os.path.join(root, "target", "optimized", "xlat"))
    ap.add_argument("--only", default="", help="comma-separated subset of: gzip,xz,sort,python,cc")
    ap.add_argument("--repeat", type=int, default=1, help="take the best of N runs of each")
    ap.add_argument("--machine", default=None, help="machine for xlat run (default: xlat's default)")
    a = ap.parse_args()
    if not os.path.exists(a.xlat):
        sys.exit(f"{a.xlat} not found: run `cargo build --profile optimized` first")
    python = shutil.which("python3", path="/usr/bin:/bin") or sys.executable
    tmp = tempfile.mkdtemp(prefix="xlat-bench-")
    try:
        text(os.path.join(tmp, "big.txt"), 8_000_000, 1)
        text(os.path.join(tmp, "mid.txt"), 3_000_000, 2)
        lines(os.path.join(tmp, "lines.txt"), 1_000_000, 3)
        csource(os.path.join(tmp, "gen.c"), 150, 4)
        cases = {
            "gzip": ["gzip", "-9", "-c", os.path.join(tmp, "big.txt")],
            "xz": ["xz", "-6", "-c", "-T1", os.path.join(tmp, "mid.txt")],
            "sort": ["sort", os.path.join(tmp, "lines.txt")],
            "python": [python, "-c", "s = 0\nfor i in range(2_000_000):\n    s += i * i % 7\nprint(s)"],
            "cc": ["gcc", "-O2", "-c", "-o", os.path.join(tmp, "gen.o"), os.path.join(tmp, "gen.c")],
        }
        only = [c for c in a.only.split(",") if c] or list(cases)
        machine = ["--machine", a.machine] if a.machine else []
        print(f"{'case':<8} {'native cpu':>10} {'run':>9} {'ratio':>7} {'trace':>9} {'ratio':>7} {'B/ref':>7} {'refs':>14}")
        for name in only:
            cmd = cases[name]
            nat = min(native(cmd)[1] for _ in range(max(a.repeat, 1)))
            run = min(timed([a.xlat, "run", *machine, "--", *cmd])[0] for _ in range(a.repeat))
            out = os.path.join(tmp, name + ".xlt")
            tr, err = min(timed([a.xlat, "trace", "-o", out, "--", *cmd]) for _ in range(a.repeat))
            # `xlat: N events (R refs, ...) ... : B bytes, X bytes/ref`
            m = re.search(r"\((\d+) refs\b.*?([\d.]+) bytes/ref\b", err)
            if not m:
                sys.exit(f"{name}: no capture summary in xlat trace's output:\n{err[-500:]}")
            refs, bpr = int(m.group(1)), float(m.group(2))
            os.remove(out)
            print(
                f"{name:<8} {nat:>9.3f}s {run:>8.2f}s {run / nat:>6.1f}x {tr:>8.2f}s {tr / nat:>6.1f}x "
                f"{bpr:>7.3f} {refs:>14,}"
            )
        print("ratios: elapsed time of xlat over the native run's CPU time (user+sys), same machine, same run")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
