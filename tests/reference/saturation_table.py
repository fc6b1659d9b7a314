#!/usr/bin/python3
"""saturation_table.py DIR [TABLE]: the tables of docs/translator.md,
"Cures: pre-norm and QK-norm", from the --json files that
tests/reference/saturation_runs.sh writes to DIR (committed in
tests/reference/saturation/), named <variant>-s<seed>.json with variant
post_norm (--post-norm), pre_norm (--pre-norm, translate train's default)
or qk_norm (--post-norm --qk-norm); a file whose "pre_norm" and "qk_norm"
are not its variant's is refused.  TABLE is one of

  seeds    one row per variant and seed: held-out exact match and BLEU,
           the last epoch's training loss, then encoder layer 0's and the decoder's self-attention layer
           0's mean row entropy and largest scaled score after the last
           epoch (on the probe batch);
  means    per variant: the mean over the seeds of exact match and BLEU,
           their range (lowest to highest seed), and whether that range
           lies wholly above or below post-norm's;
  curves   seed 0: the same four measures after epochs 0, 1, 5, 10, 20 and
           the last, per variant.

Without TABLE it prints all three, each after a line "<!-- saturation_table.py
TABLE -->" and followed by "<!-- end -->", as docs/translator.md has them
(tests/saturation/check_saturation.sh compares the two).  Reads json only."""
import glob
import json
import os
import re
import sys

# name, label, the json's (pre_norm, qk_norm)
VARIANTS = [("post_norm", "--post-norm", (0, 0)), ("pre_norm", "--pre-norm (the default)", (1, 0)),
            ("qk_norm", "--post-norm --qk-norm", (0, 1))]
ARCH = {v: arch for v, _, arch in VARIANTS}
LAYERS = [("encoder.self.0", "encoder layer 0"), ("decoder.self.0", "decoder self-attention layer 0")]


def load(d):
    runs = {}
    for path in glob.glob(os.path.join(d, "*.json")):
        m = re.match(r"(post_norm|pre_norm|qk_norm)-s(\d+)\.json$", os.path.basename(path))
        if m:
            with open(path) as f:
                run = json.load(f)
            got = (run.get("pre_norm"), run.get("qk_norm"))
            if got != ARCH[m.group(1)]:
                sys.exit("saturation_table.py: %s has pre_norm %s, qk_norm %s: not a %s run"
                         % (path, got[0], got[1], m.group(1)))
            runs[(m.group(1), int(m.group(2)))] = run
    if not runs:
        sys.exit("saturation_table.py: no <variant>-s<seed>.json in %s" % d)
    return runs


def seeds_of(runs, v):
    return sorted(s for (w, s) in runs if w == v)


def layer_at(run, epoch, name):
    for e in run["attention"]:
        if e["epoch"] == epoch:
            for l in e["layers"]:
                if l["layer"] == name:
                    return l
    sys.exit("saturation_table.py: no layer %s at epoch %d" % (name, epoch))


def last_epoch(run):
    return run["attention"][-1]["epoch"]


def score(x):
    return "%.0f" % x if x >= 10 else "%.1f" % x


def table_seeds(runs):
    out = ["| variant | seed | exact match | BLEU | training loss | enc. 0 entropy | enc. 0 largest score "
           "| dec. self 0 entropy | dec. self 0 largest score |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for v, label, _ in VARIANTS:
        for s in seeds_of(runs, v):
            r = runs[(v, s)]
            cells = [label, str(s), "%.3f" % r["exact_match"], "%.3f" % r["bleu"], "%.3f" % r["loss"]]
            for name, _ in LAYERS:
                l = layer_at(r, last_epoch(r), name)
                cells += ["%.2f" % l["entropy"], score(l["max_score"])]
            out.append("| " + " | ".join(cells) + " |")
    return out


def span(xs):
    return "%.3f to %.3f" % (min(xs), max(xs))


def versus(xs, base):
    if min(xs) > max(base):
        return "above"
    if max(xs) < min(base):
        return "below"
    return "overlaps"


def table_means(runs):
    out = ["| variant | seeds | mean exact match | range | vs. post-norm | mean BLEU | range | vs. post-norm |",
           "|---|---:|---:|---|---|---:|---|---|"]
    base = {k: [runs[("post_norm", s)][k] for s in seeds_of(runs, "post_norm")] for k in ("exact_match", "bleu")}
    for v, label, _ in VARIANTS:
        ss = seeds_of(runs, v)
        if not ss:
            continue
        cells = [label, str(len(ss))]
        for k in ("exact_match", "bleu"):
            xs = [runs[(v, s)][k] for s in ss]
            cells += ["%.3f" % (sum(xs) / len(xs)), span(xs), "-" if v == "post_norm" else versus(xs, base[k])]
        out.append("| " + " | ".join(cells) + " |")
    return out


def table_curves(runs):
    out = ["| variant | layer | measure | e = 0 | 1 | 5 | 10 | 20 | last |",
           "|---|---|---|---:|---:|---:|---:|---:|---:|"]
    for v, label, _ in VARIANTS:
        if (v, 0) not in runs:
            continue
        r = runs[(v, 0)]
        epochs = [0, 1, 5, 10, 20, last_epoch(r)]
        for name, lname in LAYERS:
            ent = ["%.2f" % layer_at(r, e, name)["entropy"] for e in epochs]
            big = [score(layer_at(r, e, name)["max_score"]) for e in epochs]
            out.append("| %s | %s | entropy (nats) | %s |" % (label, lname, " | ".join(ent)))
            out.append("| %s | %s | largest score | %s |" % (label, lname, " | ".join(big)))
    return out


TABLES = {"seeds": table_seeds, "means": table_means, "curves": table_curves}


def main():
    if len(sys.argv) not in (2, 3) or (len(sys.argv) == 3 and sys.argv[2] not in TABLES):
        sys.exit("usage: saturation_table.py DIR [%s]" % "|".join(TABLES))
    runs = load(sys.argv[1])
    if len(sys.argv) == 3:
        print("\n".join(TABLES[sys.argv[2]](runs)))
        return
    for name, fn in TABLES.items():
        print("<!-- saturation_table.py %s -->" % name)
        print("\n".join(fn(runs)))
        print("<!-- end -->")


if __name__ == "__main__":
    main()
