#!/usr/bin/python3
"""make_sampling_fixture.py: PyTorch's next-token distributions after
temperature, top-k and top-p, for tests/test_sampling.c:
tests/reference/sampling.txt; and tests/reference/sampling_gpt.txt, the
first character `gpt sample` draws from tests/reference/gpt_tiny.safetensors
after a prompt, as its PyTorch twin (gpt.py) gives it, for
tests/gpt/test_gpt_cli.sh (`gpt sample --json`'s "sampling").

Run with Debian's python3-torch:  /usr/bin/python3 tests/reference/make_sampling_fixture.py

Each case is five lines:

    case <name> <V> <temperature> <top_k> <top_p>
    logits <V float32 values; -inf for a masked token>
    before <softmax(logits), float64>
    after  <the filtered, renormalised distribution, float64>
    draws <n> <u> <token> ...        (the inverse CDF of `after` at u)

The rule (src/nn/sample.c): w = exp(l / temperature) over the finite
logits (temperature 0: one-hot at the first largest); top-k keeps
l >= the k-th largest logit (ties kept); top-p keeps v when the tokens
strictly more probable than v hold < top_p; the token for u is the first
v (id order) with u < after_0 + ... + after_v.  Torch computes it in
float64 from the float32 logits.  Without ties, top-p is checked here
against HF transformers' TopPLogitsWarper recipe (sort ascending, remove
where the cumulative probability is <= 1 - top_p).  A (top_p, logits)
pair with a token whose probability above is within 1e-9 of top_p, or a u
within 1e-9 of a step of the CDF, is left out: there the float sums'
order, not the rule, would decide."""
import math

import torch

torch.set_num_threads(1)
g = torch.Generator().manual_seed(20261207)
MARGIN = 1e-9


def f32(values):
    return torch.tensor(values, dtype=torch.float32).tolist()


def vectors():
    n = lambda V, s: f32((torch.randn(V, generator=g, dtype=torch.float64) * s).tolist())
    masked = n(12, 2.0)
    for i in (1, 4, 9):
        masked[i] = -math.inf
    return [
        ("random16", n(16, 1.5)),
        ("random65", n(65, 3.0)),
        ("masked", masked),
        ("ties", f32([2, 1, 2, 0.5, 1, 2, -1, 0.5])),
        ("all_equal", f32([0.25] * 10)),
        ("huge", f32([3e38, -3e38, 1e30, 3e38 * 0.999, 0, -1e30, 1e4, 3e38])),
        ("spread", f32([0, -5, -10, -20, -40, -80, -160, 5])),
        ("one", f32([0.3])),
        ("one_finite", f32([-math.inf, 1.5, -math.inf])),
    ]


COMBOS = [(1, 0, 1), (0.7, 0, 1), (2.5, 0, 1), (0, 0, 1), (0, 3, 0.5), (1, 3, 1), (1, 1, 1), (1, 100, 1),
          (1, 0, 0.9), (1, 0, 0.5), (1, 0, 0.1), (1, 0, 1e-9), (0.7, 5, 0.8), (2.5, 4, 0.95), (0.05, 0, 0.99),
          (100, 0, 0.3), (1, 2, 0.6)]


def filtered(l, temperature, top_k, top_p, margin=MARGIN):
    """before, after, and whether top-p's decision is clear of the margin"""
    x = torch.tensor(l, dtype=torch.float64)
    x = torch.where(torch.isfinite(x), x, torch.tensor(-math.inf, dtype=torch.float64))
    before = torch.softmax(x, 0)
    V = len(l)
    if temperature == 0:
        after = torch.zeros(V, dtype=torch.float64)
        after[torch.argmax(x)] = 1  # the first largest
        return before, after, True
    if 0 < top_k < V:
        kth = torch.topk(x, top_k).values[-1]
        x = torch.where(x >= kth, x, torch.tensor(-math.inf, dtype=torch.float64))
    probs = torch.softmax(x / temperature, 0)
    clear = True
    if top_p < 1:
        above = (probs[None, :] * (probs[None, :] > probs[:, None])).sum(1)
        clear = bool(((above - top_p).abs() > margin).all())
        keep = (above < top_p) & (probs > 0)
        if len(set(probs[probs > 0].tolist())) == int((probs > 0).sum()):  # no ties: HF's recipe agrees
            s, idx = torch.sort(probs)
            remove = torch.zeros(V, dtype=torch.bool)
            remove[idx] = (torch.cumsum(s, 0) <= 1 - top_p) | (s == 0)
            remove[idx[-1]] = False  # min_tokens_to_keep = 1
            assert clear is False or bool((~remove == keep).all()), "HF's top-p differs"
        probs = torch.where(keep, probs, torch.zeros_like(probs))
        probs = probs / probs.sum()
    return before, probs, clear


def draws(after, count):
    cdf = torch.cumsum(after, 0)
    us = [0.0, 1 - 2 ** -53] + torch.rand(count, generator=g, dtype=torch.float64).tolist()
    out = []
    for u in us:
        if bool(((cdf - u).abs() <= MARGIN).any()):
            continue
        token = int(((after > 0) & (u < cdf)).nonzero()[0]) if bool((u < cdf[-1])) else int((after > 0).nonzero()[-1])
        out.append((u, token))
    return out


def num(x):
    return "-inf" if x == -math.inf else "inf" if x == math.inf else repr(float(x))


# gpt sample's first character, end to end: the PyTorch twin (gpt.py) of
# tests/reference/gpt_tiny.safetensors in float64 reads the prompt, and its
# last logits go through the same filters.  The float build's logits are
# within ~1e-6 of these: a top-p within 1e-4 of a boundary is left out.
GPT_MODEL = "tests/reference/gpt_tiny.safetensors"
GPT_CASES = [("ab", 1, 0, 1), ("ab", 0.8, 10, 0.6), ("ab", 1.5, 0, 0.3), ("the ", 0.7, 5, 0.9), ("the ", 1, 0, 0.05)]


def gpt_cases():
    import os
    import sys
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import gpt
    model, chars = gpt.load_c_model(torch, GPT_MODEL, torch.float64)
    lines = ["# make_sampling_fixture.py, torch %s: %s's first sampled character: gpt PROMPT(hex) temperature top_k "
             "top_p, then before and after" % (torch.__version__, GPT_MODEL)]
    for prompt, t, k, p in GPT_CASES:
        ids = torch.tensor([[chars.index(c) for c in prompt.encode()]])
        with torch.no_grad():
            logits = model(ids)[0, -1]  # the prompts are shorter than the context
        before, after, clear = filtered(logits.tolist(), t, k, p, 1e-4)
        assert clear, "top-p %g is too near a boundary for %r" % (p, prompt)
        lines.append("gpt %s %r %d %r" % (prompt.encode().hex(), float(t), k, float(p)))
        lines.append("before " + " ".join(num(x) for x in before.tolist()))
        lines.append("after " + " ".join(num(x) for x in after.tolist()))
    with open("tests/reference/sampling_gpt.txt", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("sampling_gpt.txt: %d cases of gpt sample" % len(GPT_CASES))


def main():
    lines = ["# make_sampling_fixture.py, torch %s: case, logits, before, after, draws (u token)" % torch.__version__]
    left_out = 0
    for name, l in vectors():
        for t, k, p in COMBOS:
            before, after, clear = filtered(l, t, k, p)
            if not clear:
                left_out += 1
                continue
            d = draws(after, 6)
            lines.append("case %s %d %r %d %r" % (name, len(l), float(t), k, float(p)))
            lines.append("logits " + " ".join(num(x) for x in l))
            lines.append("before " + " ".join(num(x) for x in before.tolist()))
            lines.append("after " + " ".join(num(x) for x in after.tolist()))
            lines.append("draws %d " % len(d) + " ".join("%r %d" % (u, tok) for u, tok in d))
    with open("tests/reference/sampling.txt", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("sampling.txt: %d cases, %d left out (top-p within %g of a boundary)"
          % (sum(1 for x in lines if x.startswith("case")), left_out, MARGIN))


main()
gpt_cases()
