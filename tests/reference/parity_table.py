#!/usr/bin/python3
"""parity_table.py TABLE DIR: the tables of docs/translator.md, "Against
PyTorch", from the json files of DIR (committed in tests/reference/parity/).

  lockstep  from lockstep-<recipe>-<double|float>.json, which
            tests/reference/lockstep_runs.sh writes (translator.py lockstep
            --json): per recipe and precision, the steps, the largest
            relative difference of attograd's loss from the twin's over the
            first 20 steps and over all, the same for the twin against
            itself from weights perturbed by one rounding, and attograd's
            parameters after the last step against the twin's;
  quality   from attograd-s<seed>.json (translate train --json) and
            pytorch-s<seed>.json (translator.py train --json), d2l's recipe
            on the held-out split: per program the seeds, the held-out exact
            match and BLEU of each, their mean and standard deviation (n - 1);
            then attograd's mean over the twin's, the difference of the means
            and the pooled standard deviation, and whether the difference is
            within one pooled deviation and the ratio at least 0.9.

Prints the table, then a line "summary KEY VALUE" per number the text
quotes.  Reads json only."""
import glob
import json
import math
import os
import re
import sys

RECIPES = [("d2l", "d2l's: post-norm, --init d2l, SGD lr 1, clip 1"),
           ("d2l-0.1", "the same at lr 0.1"),
           ("default", "translate's default: pre-norm, --init scaled, Nesterov, cosine")]
PROGRAMS = [("attograd", "attograd"), ("pytorch", "PyTorch twin")]
MEASURES = [("exact_match", "exact match"), ("bleu", "BLEU")]


def load(path):
    with open(path) as f:
        return json.load(f)


def lockstep(d):
    print("| recipe | precision | steps | attograd vs twin: loss, steps 1-20 | all steps | twin vs twin perturbed "
          "by one rounding: steps 1-20 | all steps | parameters after the last step: largest difference | "
          "relative |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    found = 0
    for key, label in RECIPES:
        for prec in ("double", "float"):
            path = os.path.join(d, "lockstep-%s-%s.json" % (key, prec))
            if not os.path.exists(path):
                continue
            r = load(path)
            found += 1
            print("| %s | %s | %d | %.1e | %.1e | %.1e | %.1e | %.1e | %.1e |"
                  % (label, prec, r["steps"], r["max_loss_rel_20"], r["max_loss_rel"], r["self_max_loss_rel_20"],
                     r["self_max_loss_rel"], r["param_max_abs"], r["param_rel"]))
            for name in ("max_loss_rel_20", "max_loss_rel", "self_max_loss_rel_20", "self_max_loss_rel", "param_rel"):
                summary.append(("lockstep.%s.%s.%s" % (key, prec, name), "%.1e" % r[name]))
            summary.append(("lockstep.%s.%s.steps" % (key, prec), "%d" % r["steps"]))
    if not found:
        sys.exit("parity_table.py: no lockstep-<recipe>-<precision>.json in %s" % d)


def mean_sd(xs):
    m = sum(xs) / len(xs)
    return m, math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else float("nan")


def quality(d):
    runs = {}
    for path in glob.glob(os.path.join(d, "*-s*.json")):
        m = re.match(r"(attograd|pytorch)-s(\d+)\.json$", os.path.basename(path))
        if m:
            runs.setdefault(m.group(1), {})[int(m.group(2))] = load(path)
    if len(runs) < 2:
        sys.exit("parity_table.py: need attograd-s<seed>.json and pytorch-s<seed>.json in %s" % d)
    stats = {}
    print("| program | seeds | held-out exact match | mean | deviation | held-out BLEU | mean | deviation |")
    print("|---|---|---|---:|---:|---|---:|---:|")
    for prog, label in PROGRAMS:
        seeds = sorted(runs[prog])
        row = ["| %s | %s" % (label, ", ".join(map(str, seeds)))]
        for m, _ in MEASURES:
            xs = [runs[prog][s][m] for s in seeds]
            stats[(prog, m)] = (len(xs),) + mean_sd(xs)
            n, mean, sd = stats[(prog, m)]
            row.append(" | %s | %.3f | %s" % (" / ".join("%.3f" % x for x in xs), mean, "%.3f" % sd if n > 1 else "-"))
        print("".join(row) + " |")
    print()
    print("| measure | attograd / twin | difference of the means | pooled deviation | within one deviation "
          "| at least 0.9x |")
    print("|---|---:|---:|---:|---|---|")
    for m, label in MEASURES:
        (n1, m1, s1), (n2, m2, s2) = stats[("attograd", m)], stats[("pytorch", m)]
        # a program with one seed adds no degree of freedom (and no deviation)
        pooled = math.sqrt(((n1 - 1) * s1 ** 2 if n1 > 1 else 0) + ((n2 - 1) * s2 ** 2 if n2 > 1 else 0)) / \
            math.sqrt(n1 + n2 - 2)
        ratio = m1 / m2
        print("| %s | %.2f | %+.3f | %.3f | %s | %s |" % (label, ratio, m1 - m2, pooled,
                                                        "yes" if abs(m1 - m2) <= pooled else "no",
                                                        "yes" if ratio >= 0.9 else "no"))
        summary.extend([("quality.%s.ratio" % m, "%.2f" % ratio), ("quality.%s.pooled" % m, "%.3f" % pooled),
                        ("quality.%s.attograd" % m, "%.3f" % m1), ("quality.%s.pytorch" % m, "%.3f" % m2)])
    summary.append(("quality.seeds", "%d" % min(n for (n, _, _) in stats.values())))


summary = []


def main(argv):
    if len(argv) != 3 or argv[1] not in ("lockstep", "quality"):
        sys.exit("usage: parity_table.py lockstep|quality DIR")
    (lockstep if argv[1] == "lockstep" else quality)(argv[2])
    for key, value in summary:
        print("summary %s %s" % (key, value))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
