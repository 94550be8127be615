#!/usr/bin/env python3
"""Issue 19's proof, for any one-file C program: link it four ways with lld (as compiled,
xlat's C3 order, xlat's Pettis-Hansen order, lld's own --call-graph-profile-sort fed the
traced call graph), trace each again, and print side by side the program's own first-level
ITLB misses and all of them, measured, beside what `xlat layout -m` predicted by virtual
relinks of the first trace.

    scripts/layout-compare.py crates/xlat-cli/tests/programs/callbacks.c [-m mpc855t]

Needs gcc, lld and xlat (`target/release/xlat`, or `--xlat PATH`) with its QEMU plugin.
The tests (`crates/xlat-cli/tests/layout.rs`) assert the same on the shipped programs.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: exit {r.returncode}\n{r.stderr}")
    return r.stdout


def relink_line(out, machine):
    """The numbers of `xlat layout`'s virtual-relink line: as traced, then each order's."""
    for line in out.splitlines():
        if line.startswith(machine) and "virtual relinks" in line:
            words = [w.rstrip(",").replace(",", "") for w in line.split()]
            return [int(w) for w in words if w.isdigit()]
    sys.exit(f"no virtual-relink line for {machine}:\n{out}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("source", help="a C file (built with -O1 -ffunction-sections)")
    ap.add_argument("-m", "--machine", default="mpc855t")
    ap.add_argument("--xlat", default=os.path.join(ROOT, "target/release/xlat"))
    ap.add_argument("args", nargs="*", help="the program's arguments")
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="layout-compare-")
    flags = ["-O1", "-fno-toplevel-reorder", "-ffunction-sections", "-fuse-ld=lld"]

    def build(name, extra=()):
        exe = os.path.join(d, name)
        run(["gcc", *flags, *extra, "-o", exe, a.source])
        return exe

    def trace(exe):
        t = exe + ".xlt"
        run([a.xlat, "trace", "-o", t, "--", exe, *a.args])
        return t

    def measured(exe, t):
        js = t + ".json"
        run([a.xlat, "sim", "-t", t, "-m", a.machine, "--attribute", "--json", js])
        r = json.load(open(js))["runs"][0]["report"]
        rows = r["attribution"]["mappings"]
        own = next(m["itlb_l1_misses"] for m in rows if m["name"] == exe)
        levels = r["tlb_levels"]
        first = levels[0]["name"]
        return own, sum(x["misses"] for x in levels if x["name"] == first and x["side"] == "i")

    exe = build("as-compiled")
    t = trace(exe)
    o = {k: os.path.join(d, k + ".txt") for k in ["c3", "ph", "cg", "lld"]}
    out = run([a.xlat, "layout", t, "-o", o["c3"], "--call-graph", o["cg"], "-m", a.machine])
    run([a.xlat, "layout", t, "--algorithm", "pettis-hansen", "-o", o["ph"]])
    predicted = relink_line(out, a.machine)
    rows = [("as compiled", exe, t, predicted[0])]
    cgp = f"-Wl,--call-graph-ordering-file={o['cg']},--print-symbol-order={o['lld']}"
    for name, flag, pred in [
        ("C3 (xlat)", f"-Wl,--symbol-ordering-file={o['c3']}", predicted[1]),
        ("Pettis-Hansen (xlat)", f"-Wl,--symbol-ordering-file={o['ph']}", predicted[2]),
        ("lld call-graph sort", cgp, None),
    ]:
        e = build(name.split()[0].lower(), [flag])
        rows.append((name, e, trace(e), pred))
    # lld prints its order only when it sorted something; else it kept the order as compiled.
    if os.path.exists(o["lld"]):
        out = run([a.xlat, "layout", t, "-o", os.path.join(d, "unused.txt"),
                   "--order", o["lld"], "-m", a.machine])
        rows[3] = rows[3][:3] + (relink_line(out, a.machine)[3],)
    else:
        rows[3] = rows[3][:3] + (predicted[0],)
    print(f"{a.machine} first-level ITLB misses of {os.path.basename(a.source)}")
    print(f"{'layout':<22}{'program (measured)':>20}{'all (measured)':>16}{'all (predicted)':>17}")
    for name, e, tr, pred in rows:
        own, all_ = measured(e, tr)
        print(f"{name:<22}{own:>20,}{all_:>16,}{pred:>17,}")
    print(f"(files in {d})")


if __name__ == "__main__":
    main()
