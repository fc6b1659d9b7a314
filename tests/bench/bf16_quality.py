#!/usr/bin/python3
"""tests/bench/bf16_quality.py: does training with bf16 products end where
fp32 does? (`make bench-bf16-quality`; about half an hour, one thread.)

Trains, in fp32 and with --precision bf16, each from the same seed:
  - the GPT example (gpt train, its defaults: 2000 steps), seeds 1..5:
    final training loss and held-out loss;
  - the toy translator (translate train, its defaults: 50 epochs, on the
    split that `make run` makes), seeds 1..5: final loss, held-out loss,
    exact match and BLEU;
  - the ladder (ladder all), seeds 1..5: held-out bits per character per
    rung, the seeds' mean (one seed's run moves by up to 4% with the seed
    at the rungs without a residual or a norm, bf16 or not);
  - the XL model (GPT-2 small's body, C 768, L 12, H 12, F 3072, T 128,
    B 4), 50 steps, seed 0: training loss at the end.

Verdicts, as the criteria are stated:
  - 5 seeds: |mean(bf16) - mean(fp32)| <= 2 s, s the pooled standard
    deviation of the two groups of seeds (sqrt((s_fp32^2 + s_bf16^2) / 2));
  - ladder: |mean bits(bf16) / mean bits(fp32) - 1| <= 1% at every rung;
  - XL: |loss(bf16) / loss(fp32) - 1| <= 2% at step 50.

Prints a markdown table on stdout and writes the loss curves of seed 1
(GPT, translator) and of the XL run, fp32 beside bf16, as one SVG.

usage: bf16_quality.py BUILD_DIR SVG_OUT [--seeds N] [--smoke]
"""
import json
import math
import os
import subprocess
import sys
import tempfile

DATA = "examples/data/eng-fra.tsv"
PRECISIONS = ("fp32", "bf16")


def run(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        sys.exit("bf16_quality: %s failed (exit %d):\n%s" % (" ".join(cmd), r.returncode, r.stdout[-2000:]))
    return r.stdout


def gpt(build, tmp, prec, seed, extra):
    js = os.path.join(tmp, "gpt-%s-%d.json" % (prec, seed))
    run([build + "/gpt", "train", "--data", DATA, "--out", os.path.join(tmp, "gpt.st"), "--seed", str(seed),
         "--precision", prec, "--threads", "1", "--quiet", "--json", js] + extra)
    with open(js) as f:
        d = json.load(f)
    return d


def translate(build, tmp, prec, seed, extra):
    js, trace = os.path.join(tmp, "tr-%s-%d.json" % (prec, seed)), os.path.join(tmp, "tr-%s-%d.tsv" % (prec, seed))
    run([build + "/translate", "train", "--data", tmp + "/train.tsv", "--test", tmp + "/heldout.tsv",
         "--out", os.path.join(tmp, "tr.st"), "--seed", str(seed), "--precision", prec, "--threads", "1",
         "--quiet", "--json", js, "--trace", trace] + extra)
    with open(js) as f:
        d = json.load(f)
    with open(trace) as f:
        rows = [line.split("\t") for line in f.read().splitlines()[1:]]
    d["curve"] = [(int(r[0]), float(r[3])) for r in rows]
    return d


def ladder(build, prec, seed, extra):
    out = run([build + "/ladder", "all", "--data", DATA, "--precision", prec, "--seed", str(seed), "--quiet"] + extra)
    bits = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].isdigit():
            bits[int(cells[0])] = (cells[1], float(cells[2]))
    if not bits:
        sys.exit("bf16_quality: no rung in the ladder's output:\n" + out)
    return bits


def mean_sd(xs):
    m = sum(xs) / len(xs)
    return m, math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else 0.0


def seeds_row(name, a, b):
    """a, b: the fp32 and bf16 values over the seeds."""
    (ma, sa), (mb, sb) = mean_sd(a), mean_sd(b)
    s = math.sqrt((sa * sa + sb * sb) / 2)
    ok = abs(mb - ma) <= 2 * s if s > 0 else mb == ma
    print("| %s | %.4f ± %.4f | %.4f ± %.4f | %+.4f | %.4f | %s |" % (name, ma, sa, mb, sb, mb - ma, 2 * s,
                                                                      "yes" if ok else "**no**"))
    return ok


def svg(path, panels):
    """panels: [(title, {prec: [(x, y)]})], side by side."""
    W, H, pad = 300, 220, 40
    colour = {"fp32": "#1f77b4", "bf16": "#d62728"}
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
           'font-family="sans-serif" font-size="11">' % (W * len(panels), H + 30, W * len(panels), H + 30)]
    for i, (title, curves) in enumerate(panels):
        x0 = i * W
        pts = [p for c in curves.values() for p in c]
        xmin, xmax = min(p[0] for p in pts), max(p[0] for p in pts)
        ymin, ymax = min(p[1] for p in pts), max(p[1] for p in pts)
        sx = lambda x: x0 + pad + (x - xmin) / max(xmax - xmin, 1e-9) * (W - 1.5 * pad)
        sy = lambda y: 20 + (ymax - y) / max(ymax - ymin, 1e-9) * (H - pad - 20)
        out.append('<text x="%d" y="15">%s</text>' % (x0 + pad, title))
        out.append('<rect x="%d" y="20" width="%d" height="%d" fill="none" stroke="#999"/>' %
                   (x0 + pad, W - 1.5 * pad, H - pad - 20))
        out.append('<text x="%d" y="%d">%.2f</text><text x="%d" y="%d">%.2f</text>' %
                   (x0 + 2, 28, ymax, x0 + 2, H - pad, ymin))
        out.append('<text x="%d" y="%d">step %d</text><text x="%d" y="%d" text-anchor="end">%d</text>' %
                   (x0 + pad, H - pad + 14, xmin, x0 + W - pad / 2, H - pad + 14, xmax))
        for prec, c in curves.items():
            d = " ".join("%.1f,%.1f" % (sx(x), sy(y)) for x, y in c)
            out.append('<polyline fill="none" stroke="%s" stroke-width="1.2"%s points="%s"/>' %
                       (colour[prec], ' stroke-dasharray="4 3"' if prec == "bf16" else "", d))
    for j, prec in enumerate(PRECISIONS):
        out.append('<text x="%d" y="%d" fill="%s">%s products</text>' % (40 + 120 * j, H + 20, colour[prec], prec))
    out.append("</svg>")
    out = [line.replace("<text ", '<text font-size="11" ') for line in out]
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def smooth(curve, n):
    """Means of n consecutive points: a per-step loss is noisy."""
    return [(curve[i + n - 1][0], sum(y for _, y in curve[i:i + n]) / n) for i in range(0, len(curve) - n + 1, n)]


def main():
    args = sys.argv[1:]
    if len(args) < 2:
        sys.exit(__doc__)
    build, svg_out = args[0], args[1]
    seeds = int(args[args.index("--seeds") + 1]) if "--seeds" in args else 5
    smoke = "--smoke" in args
    g_extra = ["--steps", "40", "--eval-every", "20"] if smoke else ["--eval-every", "100"]
    t_extra = ["--epochs", "2"] if smoke else []
    l_extra = ["--steps", "40"] if smoke else []
    xl = ["--hidden", "768", "--heads", "12", "--ffn", "3072", "--layers", "12", "--context", "128", "--batch", "4",
          "--steps", "50", "--eval-every", "10"]
    if smoke:
        xl = ["--steps", "6", "--eval-every", "3"]
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        run([build + "/translate", "split", "--data", DATA, "--train", tmp + "/train.tsv", "--test",
             tmp + "/heldout.tsv"])
        g = {p: [gpt(build, tmp, p, s, g_extra) for s in range(1, seeds + 1)] for p in PRECISIONS}
        t = {p: [translate(build, tmp, p, s, t_extra) for s in range(1, seeds + 1)] for p in PRECISIONS}
        lad = {p: [ladder(build, p, s, l_extra) for s in range(1, seeds + 1)] for p in PRECISIONS}
        x = {p: gpt(build, tmp, p, 0, xl) for p in PRECISIONS}

    print("### bf16 against fp32: where training ends\n")
    print("%d seeds each; mean ± standard deviation over the seeds; within: |bf16 - fp32| <= 2 s_pooled.\n" % seeds)
    print("| run | fp32 | bf16 | bf16 - fp32 | 2 s_pooled | within |\n|---|---:|---:|---:|---:|---|")
    for key, name in (("loss", "GPT: training loss"), ("val_loss", "GPT: held-out loss")):
        ok &= seeds_row(name, [d[key] for d in g["fp32"]], [d[key] for d in g["bf16"]])
    for key, name in (("loss", "translator: training loss"), ("test_loss", "translator: held-out loss"),
                      ("exact_match", "translator: held-out exact match"), ("bleu", "translator: held-out BLEU")):
        ok &= seeds_row(name, [d[key] for d in t["fp32"]], [d[key] for d in t["bf16"]])

    print("\n| ladder rung | fp32 bits/char | bf16 bits/char | ratio - 1 | within 1% | fp32 seeds' range |"
          "\n|---|---:|---:|---:|---|---:|")
    for r in sorted(lad["fp32"][0]):
        fp, bf = [run_[r][1] for run_ in lad["fp32"]], [run_[r][1] for run_ in lad["bf16"]]
        a, b = mean_sd(fp)[0], mean_sd(bf)[0]
        within = abs(b / a - 1) <= 0.01
        ok &= within
        print("| %d %s | %.3f | %.3f | %+.2f%% | %s | %.1f%% |" % (r, lad["fp32"][0][r][0], a, b, 100 * (b / a - 1),
              "yes" if within else "**no**", 100 * (max(fp) - min(fp)) / a))

    a, b = x["fp32"]["loss"], x["bf16"]["loss"]
    within = abs(b / a - 1) <= 0.02
    ok &= within
    print("\n| XL, %d steps | fp32 loss | bf16 loss | ratio - 1 | within 2%% |\n|---|---:|---:|---:|---|" %
          x["fp32"]["steps"])
    print("| training loss at the end | %.4f | %.4f | %+.2f%% | %s |" % (a, b, 100 * (b / a - 1),
                                                                       "yes" if within else "**no**"))
    svg(svg_out, [("GPT, seed 1: held-out loss", {p: [(h["step"], h["val_loss"]) for h in g[p][0]["history"]]
                                                  for p in PRECISIONS}),
                  ("translator, seed 1: loss (means of 20 steps)", {p: smooth(t[p][0]["curve"], 20)
                                                                    for p in PRECISIONS}),
                  ("XL: training loss", {p: [(h["step"], h["loss"]) for h in x[p]["history"]] for p in PRECISIONS})])
    print("\n(loss curves: %s)" % svg_out)
    print("\nall within: %s" % ("yes" if ok else "no"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
