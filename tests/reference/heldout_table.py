#!/usr/bin/python3
"""heldout_table.py DIR: the held-out comparison table of docs/translator.md
from the --json files that tests/reference/heldout.sh writes to DIR, named
<impl>_<recipe>_<init>_s<seed>.json (impl c or pt; recipe r1 or r2; init
scaled or d2l).  Prints Markdown: one row per implementation, recipe and
initialisation, with each seed's held-out exact match, BLEU and final
training loss, and their means; then the saturation of encoder layer 0
(largest scaled score and row gap on the probe batch) over training, and
each layer's mean row entropy before and after training.

Needs no PyTorch: it only reads json."""
import glob
import json
import os
import re
import sys

IMPLS = {"c": "attograd", "pt": "PyTorch twin"}
RECIPES = {"r1": "Nesterov + cosine, 50 ep.", "r2": "plain SGD lr 1.0, 30 ep."}


def load(d):
    runs = {}
    for path in glob.glob(os.path.join(d, "*.json")):
        m = re.match(r"(c|pt)_(r1|r2)_(scaled|d2l)_s(\d+)\.json$", os.path.basename(path))
        if not m:
            continue
        with open(path) as f:
            runs[(m.group(1), m.group(2), m.group(3), int(m.group(4)))] = json.load(f)
    return runs


def mean(xs):
    return sum(xs) / len(xs) if xs else float("nan")


def attention(run):
    """[(epoch, {layer: stats})] for either program's json."""
    if "history" in run:  # the twin: attention_init, then one per epoch
        out = [(0, {l["layer"]: l for l in run["attention_init"]})]
        out += [(h["epoch"], {l["layer"]: l for l in h["attention"]}) for h in run["history"]]
        return out
    return [(a["epoch"], {l["layer"]: l for l in a["layers"]}) for a in run.get("attention", [])]


def main(d):
    runs = load(d)
    print("| program | recipe | init | seeds | held-out exact match | mean | held-out BLEU | mean "
          "| training loss | mean |")
    print("|---|---|---|---|---|---:|---|---:|---|---:|")
    for impl in IMPLS:
        for rec in RECIPES:
            for init in ("scaled", "d2l"):
                rs = sorted((k[3], v) for k, v in runs.items() if k[:3] == (impl, rec, init))
                if not rs:
                    continue
                seeds = ", ".join(str(s) for s, _ in rs)
                em = [r["exact_match"] for _, r in rs]
                bl = [r["bleu"] for _, r in rs]
                lo = [r["loss"] for _, r in rs]
                f = lambda xs: " / ".join("%.3f" % x for x in xs)
                print("| %s | %s | %s | %s | %s | %.3f | %s | %.3f | %s | %.3f |"
                      % (IMPLS[impl], RECIPES[rec], init, seeds, f(em), mean(em), f(bl), mean(bl), f(lo), mean(lo)))
    print()
    print("Encoder layer 0 on the probe batch, seed 0: largest scaled score / largest row gap after epoch e.")
    print()
    print("| program | recipe | init | e = 0 | 1 | 5 | 10 | 20 | last |")
    print("|---|---|---|---|---|---|---|---|---|")
    for impl in IMPLS:
        for rec in RECIPES:
            for init in ("scaled", "d2l"):
                run = runs.get((impl, rec, init, 0))
                if not run:
                    continue
                at = dict(attention(run))
                if not at:
                    continue
                last = max(at)
                cells = []
                for e in (0, 1, 5, 10, 20, last):
                    s = at.get(e, {}).get("encoder.self.0")
                    cells.append("%.0f / %.0f" % (s["max_score"], s["max_gap"]) if s and s["max_score"] is not None
                                 else "")
                print("| %s | %s | %s | %s |" % (IMPLS[impl], RECIPES[rec], init, " | ".join(cells)))
    print()
    print("Mean row entropy (nats) of each attention layer on the probe batch, seed 0: before training -> "
          "after the last epoch.")
    print()
    layers = ["encoder.self.0", "encoder.self.1", "decoder.self.0", "decoder.self.1", "decoder.cross.0",
              "decoder.cross.1"]
    print("| program | recipe | init | " + " | ".join(layers) + " |")
    print("|---|---|---|" + "---|" * len(layers))
    for impl in IMPLS:
        for rec in RECIPES:
            for init in ("scaled", "d2l"):
                run = runs.get((impl, rec, init, 0))
                at = dict(attention(run)) if run else {}
                if not at:
                    continue
                first, last = at[min(at)], at[max(at)]
                cells = ["%.2f -> %.2f" % (first[l]["entropy"], last[l]["entropy"]) if l in first and l in last
                         else "" for l in layers]
                print("| %s | %s | %s | %s |" % (IMPLS[impl], RECIPES[rec], init, " | ".join(cells)))
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: heldout_table.py DIR")
    sys.exit(main(sys.argv[1]))
