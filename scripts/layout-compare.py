#!/usr/bin/env python3
"""Issue 19's and 42's proof, for any C program: link it five ways with lld (as compiled,
xlat's C3 order, xlat's Pettis-Hansen order, lld's own --call-graph-profile-sort fed the
traced call graph, xlat's order tuned for the machine), trace each again, and print side by
side the program's own first-level ITLB misses and all of them, measured, beside what one
`xlat layout --json` predicted by virtual relinks of the first trace (with the link map).

    scripts/layout-compare.py crates/xlat-cli/tests/programs/callbacks.c [-m mpc855t]
    scripts/layout-compare.py a.c b.c libfoo.a --ldlibs -lm -- ARGS   # sources, objects, archives
    scripts/layout-compare.py --make DIR --target prog -- ARGS          # a Makefile project

Sources are compiled with -O1 -ffunction-sections; objects and archives are linked as they
are (build them with -ffunction-sections, or pass --static to see whole sections move). With
--make, `make -C DIR CC=gcc CFLAGS=... LDFLAGS=... TARGET` builds the program, once per layout
(the target is removed first, so it relinks). Needs gcc, lld and xlat
(`target/release/xlat`, or `--xlat PATH`) with its QEMU plugin. The tests
(`crates/xlat-cli/tests/layout.rs`, `layout_tuned.rs`) assert the same on the shipped programs.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CFLAGS = ["-O1", "-fno-toplevel-reorder", "-ffunction-sections"]


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: exit {r.returncode}\n{r.stderr}")
    return r.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("inputs", nargs="*", help="C files, objects (.o) and archives (.a)")
    ap.add_argument("-m", "--machine", default="mpc855t")
    ap.add_argument("--xlat", default=os.path.join(ROOT, "target/release/xlat"))
    ap.add_argument("--ldlibs", default="", help="libraries to link (-lm ...)")
    ap.add_argument("--static", action="store_true", help="link statically")
    ap.add_argument("--make", metavar="DIR", help="a Makefile project's directory")
    ap.add_argument("--target", help="with --make: the program it builds (a path in DIR)")
    ap.add_argument("--evaluations", default="300", help="--algorithm tuned's budget")
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    a = ap.parse_args(argv[:cut])
    args = argv[cut + 1:]  # the program's arguments, after --
    if bool(a.make) == bool(a.inputs) or (a.make and not a.target):
        sys.exit("give the program's sources/objects, or --make DIR --target NAME")
    d = tempfile.mkdtemp(prefix="layout-compare-")
    link = ["-fuse-ld=lld"] + (["-static"] if a.static else [])

    def build(name, extra=()):
        exe = os.path.join(d, name)
        if a.make:
            target = os.path.join(a.make, a.target)
            if os.path.exists(target):
                os.remove(target)
            ldflags = " ".join(link + list(extra))
            run(["make", "-C", a.make, "CC=gcc", f"CFLAGS={' '.join(CFLAGS)}",
                 f"LDFLAGS={ldflags}", a.target])
            run(["cp", target, exe])
        else:
            run(["gcc", *CFLAGS, *link, *extra, "-o", exe, *a.inputs, *a.ldlibs.split()])
        return exe

    def trace(exe):
        t = exe + ".xlt"
        run([a.xlat, "trace", "-o", t, "--", exe, *args])
        return t

    def measured(exe, t):
        js = t + ".json"
        run([a.xlat, "sim", "-t", t, "-m", a.machine, "--attribute", "--json", js])
        r = json.load(open(js))["runs"][0]["report"]
        rows = r["attribution"]["mappings"]
        own = next((m["itlb_l1_misses"] for m in rows if m["name"] == exe), 0)
        levels = r["tlb_levels"]
        first = levels[0]["name"]
        return own, sum(x["misses"] for x in levels if x["name"] == first and x["side"] == "i")

    o = {k: os.path.join(d, k + ".txt") for k in ["c3", "ph", "cg", "lld", "tuned"]}
    lmap = os.path.join(d, "as-compiled.map")
    exe = build("as-compiled", [f"-Wl,-Map={lmap}"])
    t = trace(exe)
    run([a.xlat, "layout", t, "-o", o["c3"], "--call-graph", o["cg"]])
    run([a.xlat, "layout", t, "--algorithm", "pettis-hansen", "-o", o["ph"]])
    lld_exe = build("lld", [f"-Wl,--call-graph-ordering-file={o['cg']},"
                            f"--print-symbol-order={o['lld']}"])
    js = os.path.join(d, "layout.json")
    cmd = [a.xlat, "layout", t, "--algorithm", "tuned", "-m", a.machine, "--map", lmap,
           "--evaluations", a.evaluations, "-o", o["tuned"], "--json", js]
    # lld prints its order only when it sorted something; else it kept the order as compiled.
    has_lld = os.path.exists(o["lld"])
    if has_lld:
        cmd += ["--order", o["lld"]]
    run(cmd)
    j = json.load(open(js))
    row = next(r for r in j["prediction"]["machines"] if r["machine"] == a.machine)
    pred = {x["layout"]: int(x["value"]) for x in row["layouts"]}
    lld_name = next((k for k in pred if "'s order" in k), "as traced")
    rows = [("as compiled", exe, t, pred["as traced"])]
    for name, key, layout in [
        ("C3 (xlat)", "c3", "the C3 order"),
        ("Pettis-Hansen (xlat)", "ph", "the Pettis-Hansen order"),
        (f"tuned for {a.machine}", "tuned", "the tuned order"),
    ]:
        e = build(key, [f"-Wl,--symbol-ordering-file={o[key]}"])
        rows.append((name, e, trace(e), pred[layout]))
    rows.append(("lld call-graph sort", lld_exe, trace(lld_exe),
                 pred[lld_name] if has_lld else pred["as traced"]))
    if has_lld:
        # Its printed order applied as an ordering file: what the prediction models (in a
        # static link the two differ: several functions per section, shared local names).
        e = build("lld-printed", [f"-Wl,--symbol-ordering-file={o['lld']}"])
        rows.append(("lld's printed order", e, trace(e), pred[lld_name]))
    what = a.target if a.make else " ".join(os.path.basename(i) for i in a.inputs)
    print(f"{a.machine} first-level ITLB misses of {what}")
    for w in j["pieces"]["warnings"]:
        print(f"warning: {w}")
    print(f"{'layout':<26}{'program (measured)':>20}{'all (measured)':>16}{'all (predicted)':>17}")
    for name, e, tr, p in rows:
        own, all_ = measured(e, tr)
        print(f"{name:<26}{own:>20,}{all_:>16,}{p:>17,}")
    print(f"(files in {d})")


if __name__ == "__main__":
    main()
