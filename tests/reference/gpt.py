#!/usr/bin/python3
"""gpt.py: the PyTorch twin of the character-level GPT (src/nn/gpt.c,
examples/gpt/): the same model under the same parameter names, the same
text pipeline, and one training step written out as a parity fixture.

    # the training-step fixture (tests/test_gpt.c): from a checkpoint that
    # `gpt train` wrote, one Adam step on a fixed batch, in float32 and float64
    /usr/bin/python3 tests/reference/gpt.py step --model tests/reference/gpt_tiny.safetensors \\
        --data tests/reference/tiny.tsv --out tests/reference/gpt_step.safetensors

    # the same step under torch.autocast("cpu", dtype=torch.bfloat16), with
    # the logits (tests/test_gpt.c)
    /usr/bin/python3 tests/reference/gpt.py autocast --model tests/reference/gpt_tiny.safetensors \\
        --data tests/reference/tiny.tsv --out tests/reference/gpt_autocast.safetensors

    # train as `gpt train` does (its flags and defaults), printing the loss and
    # the milliseconds per step (for side-by-side timing; --threads 1 pins
    # torch to one thread)
    /usr/bin/python3 tests/reference/gpt.py train --data examples/data/eng-fra.tsv [--steps 2000]
        [--batch 32] [--context 32] [--hidden 64] [--heads 4] [--ffn 256] [--layers 2]
        [--activation gelu|gelu_tanh|relu] [--untied] [--dropout 0] [--lr 1e-3] [--clip 1.0] [--seed 0]
        [--threads N] [--eval-every 100]

    # side-by-side timing for `make bench` (tests/bench/gpt.h): one JSON line
    # with the milliseconds of a training step (forward, backward, clip, Adam)
    # on random ids, and the tokens per second of a generate loop as nanoGPT's
    # (crop to the context, the whole window forward, argmax, append: no cache)
    # and of the same loop with a key/value cache (the same tokens, checked)
    # (--autocast: the step's forward under torch.autocast("cpu", dtype=torch.bfloat16))
    /usr/bin/python3 tests/reference/gpt.py bench [--threads 1] [--seconds 2] [--new 31,200] [--autocast]

The model: x = tokens[ids] + positions[t]; per block x = x + attention(norm1(x)),
x = x + ffn(norm2(x)) (causal attention, heads of width C / H, GELU MLP);
logits = norm(x) tokens^T (tied) or head(norm(x)) (untied).  Names:
embedding.tokens.weight, embedding.positions.weight,
blocks.<i>.attention.w_{q,k,v,o}.{weight,bias}, blocks.<i>.norm{1,2}.*,
blocks.<i>.ffn.dense{1,2}.*, norm.*, head.weight.  PyTorch cannot draw the C
program's random numbers (initial weights, batch offsets), so `train` matches
`gpt train` statistically; `step` starts from the C checkpoint's weights and
matches it to rounding.
"""
import argparse
import math
import os
import resource
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from translator import import_torch, st_read, st_write  # noqa: E402  (safetensors by hand; threads)

FORMAT = "attograd-gpt-1"
STEP_BATCH = 4
ADAM_LR, ADAM_BETAS, ADAM_EPS, CLIP = 1e-3, (0.9, 0.999), 1e-8, 1.0


# ---------------------------------------------------------------------------
# the text: examples/gpt/text.c
# ---------------------------------------------------------------------------

def load_text(path):
    """A .tsv gives its first column, one line each, a line equal to the one
    before it skipped; any other file is read as it is (bytes)."""
    with open(path, "rb") as f:
        data = f.read()
    if not path.endswith(".tsv"):
        return data
    out, prev = [], None
    for line in data.split(b"\n"):
        col = line.split(b"\t")[0].split(b"\r")[0]
        if col and col != prev:
            out.append(col + b"\n")
            prev = col
    return b"".join(out)


def held_out_start(n, context):
    held = n // 10
    if held < context + 1 and n >= 2 * (context + 1):
        held = context + 1
    return n - held


# ---------------------------------------------------------------------------
# the model: src/nn/gpt.c over src/nn/transformer.c and attention.c
# ---------------------------------------------------------------------------

def define_model(torch):
    nn, F = torch.nn, torch.nn.functional

    class Attention(nn.Module):
        def __init__(self, C, H, dropout):
            super().__init__()
            self.H, self.dropout = H, dropout
            self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(C, C) for _ in range(4))

        def forward(self, x):
            B, T, C = x.shape
            split = lambda t: t.view(B, T, self.H, C // self.H).transpose(1, 2)  # noqa: E731
            q, k, v = split(self.w_q(x)), split(self.w_k(x)), split(self.w_v(x))
            scores = q @ k.transpose(-1, -2) / math.sqrt(C // self.H)
            causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
            p = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)
            p = F.dropout(p, self.dropout, self.training)  # on the attention weights, as ag_mha_layer
            return self.w_o((p @ v).transpose(1, 2).reshape(B, T, C))

    class FFN(nn.Module):
        def __init__(self, C, Fw, activation):
            super().__init__()
            self.dense1, self.dense2 = nn.Linear(C, Fw), nn.Linear(Fw, C)
            self.act = {"gelu": F.gelu, "relu": F.relu,
                        "gelu_tanh": lambda t: F.gelu(t, approximate="tanh")}[activation]

        def forward(self, x):
            return self.dense2(self.act(self.dense1(x)))

    class Block(nn.Module):
        def __init__(self, C, H, Fw, activation, dropout):
            super().__init__()
            self.dropout = dropout
            self.attention, self.norm1 = Attention(C, H, dropout), nn.LayerNorm(C)
            self.ffn, self.norm2 = FFN(C, Fw, activation), nn.LayerNorm(C)

        def forward(self, x):
            drop = lambda t: F.dropout(t, self.dropout, self.training)  # noqa: E731
            x = x + drop(self.attention(self.norm1(x)))  # pre-norm: the residual stream is never normalised
            return x + drop(self.ffn(self.norm2(x)))

    class Embedding(nn.Module):
        def __init__(self, V, C, T):
            super().__init__()
            self.tokens, self.positions = nn.Embedding(V, C), nn.Embedding(T, C)

        def forward(self, ids):
            return self.tokens(ids) + self.positions.weight[: ids.shape[1]]

    class GPT(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            self.cfg = cfg
            C = cfg["hidden"]
            self.embedding = Embedding(cfg["vocab"], C, cfg["context"])
            self.blocks = nn.ModuleList(Block(C, cfg["heads"], cfg["ffn"], cfg["activation"], cfg["dropout"])
                                        for _ in range(cfg["layers"]))
            self.norm = nn.LayerNorm(C)
            self.head = nn.Linear(C, cfg["vocab"], bias=False) if cfg["untied"] else None
            self.init_weights()

        def init_weights(self):
            """GPT-2's: N(0, 0.02), the residual projections 0.02 / sqrt(2 L), zero biases."""
            for name, p in self.named_parameters():
                if name.endswith("bias"):
                    nn.init.zeros_(p)
                elif "norm" in name:
                    nn.init.ones_(p)
                else:
                    residual = name.endswith("w_o.weight") or name.endswith("dense2.weight")
                    nn.init.normal_(p, 0, 0.02 / math.sqrt(2 * self.cfg["layers"]) if residual else 0.02)

        def forward(self, ids):
            x = F.dropout(self.embedding(ids), self.cfg["dropout"], self.training)
            for b in self.blocks:
                x = b(x)
            x = self.norm(x)
            return self.head(x) if self.head is not None else x @ self.embedding.tokens.weight.t()

        def loss(self, ids, targets):
            logits = self(ids)
            return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))

    return GPT


# ---------------------------------------------------------------------------
# step: the parity fixture
# ---------------------------------------------------------------------------

def load_c_model(torch, path, dtype):
    tensors, meta = st_read(path)
    if meta.get("format") != FORMAT:
        sys.exit("%s: not a gpt model (format %r)" % (path, meta.get("format")))
    chars = bytes(int(c) for c in meta["vocab"].split(","))
    cfg = dict(vocab=len(chars), context=int(meta["context"]), hidden=int(meta["hidden"]),
               heads=int(meta["heads"]), ffn=int(meta["ffn"]), layers=int(meta["layers"]),
               untied=int(meta["untied"]), activation=meta["activation"], dropout=float(meta["dropout"]))
    model = define_model(torch)(cfg).to(dtype)
    model.eval()  # the step is taken without dropout
    names = [n for n, _ in model.named_parameters()]
    stored = [n for n in tensors if not n.startswith("optimizer.")]
    assert sorted(names) == sorted(stored), set(names) ^ set(stored)
    with torch.no_grad():
        for name, p in model.named_parameters():
            dt, shape, values = tensors[name]
            assert dt == "F32" and list(shape) == list(p.shape), (name, dt, shape, p.shape)
            p.copy_(torch.tensor(values, dtype=torch.float32).reshape(shape).to(dtype))
    return model, chars


def step_batch(torch, model, chars, text):
    """The step's batch: STEP_BATCH windows spread over the text's training
    part, and their next characters."""
    index = {c: i for i, c in enumerate(chars)}
    ids = torch.tensor([index[c] for c in text], dtype=torch.long)
    T, split = model.cfg["context"], held_out_start(len(text), model.cfg["context"])
    at = [k * (split - T) // STEP_BATCH for k in range(STEP_BATCH)]
    return torch.stack([ids[i:i + T] for i in at]), torch.stack([ids[i + 1:i + T + 1] for i in at])


def cmd_step(torch, a):
    text = load_text(a.data)
    out, names = [], None
    meta = {"generator": "tests/reference/gpt.py step", "torch": torch.__version__,
            "model": os.path.basename(a.model), "data": os.path.basename(a.data)}
    for dtype, suffix, fdt in ((torch.float32, "", "F32"), (torch.float64, "64", "F64")):
        model, chars = load_c_model(torch, a.model, dtype)
        x, y = step_batch(torch, model, chars, text)
        if suffix == "":
            out.append(("batch.x", "I64", list(x.shape), x.reshape(-1).tolist()))
            out.append(("batch.y", "I64", list(y.shape), y.reshape(-1).tolist()))
        params = list(model.parameters())
        opt = torch.optim.Adam(params, lr=ADAM_LR, betas=ADAM_BETAS, eps=ADAM_EPS)
        opt.zero_grad(set_to_none=False)
        loss = model.loss(x, y)
        loss.backward()
        grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
        norm = torch.nn.utils.clip_grad_norm_(params, CLIP)
        opt.step()
        out.append(("loss" + suffix, fdt, [1], [float(loss)]))
        out.append(("norm" + suffix, fdt, [1], [float(norm)]))
        names = [n for n, _ in model.named_parameters()]
        for prefix, table in (("grad", grads), ("adam", dict(model.named_parameters()))):
            for n in names:
                t = table[n].detach()
                out.append(("%s%s.%s" % (prefix, suffix, n), fdt, list(t.shape), t.reshape(-1).tolist()))
        print("%s: loss %.9g, gradient norm %.9g (before clipping to %g)" % (fdt, float(loss), float(norm), CLIP))
    meta["description"] = (
        "batch.x, batch.y: %d windows at offsets k (split - T) / %d of the text's training part and their next "
        "characters; loss, norm (of the gradient, before clipping), grad.<p> (unclipped), adam.<p> (after "
        "clipping to %g and one Adam step, lr %g, betas %s, eps %g), from the checkpoint's weights; in float32, "
        "and with suffix 64 in float64" % (STEP_BATCH, STEP_BATCH, CLIP, ADAM_LR, ADAM_BETAS, ADAM_EPS))
    st_write(a.out, out, meta)
    print("wrote %s: %d tensors, %d bytes" % (a.out, len(out), os.path.getsize(a.out)))
    return 0


def check_autocast_rules(torch):
    """What tests/test_gpt.c and docs/precision.md say autocast does on the
    CPU, asserted on this torch: linear and matmul return bf16; softmax,
    gelu, a scale and masked_fill of a bf16 tensor stay bf16; adding it to
    a float32 one gives float32; layer norm of float32 and cross_entropy
    of bf16 logits give float32."""
    F, bf16, f32 = torch.nn.functional, torch.bfloat16, torch.float32
    x, w = torch.randn(4, 6), torch.randn(6, 6)
    with torch.autocast("cpu", dtype=bf16):
        y = F.linear(x, w)
        got = [y, x @ w, torch.softmax(y, -1), F.gelu(y), y / 3.0, y.masked_fill(y > 0, float("-inf")), x + y,
               F.layer_norm(x, (6,)), F.cross_entropy(y, torch.tensor([0, 1, 2, 3]))]
    want = [bf16] * 6 + [f32] * 3
    assert [t.dtype for t in got] == want, [t.dtype for t in got]


def cmd_autocast(torch, a):
    """The step of cmd_step in float32 weights under torch.autocast("cpu",
    dtype=torch.bfloat16): the forward (and so its backward) runs linear and
    matmul in bf16, as PyTorch users turn it on; clipping and Adam outside."""
    check_autocast_rules(torch)
    text = load_text(a.data)
    model, chars = load_c_model(torch, a.model, torch.float32)
    x, y = step_batch(torch, model, chars, text)
    params = list(model.parameters())
    opt = torch.optim.Adam(params, lr=ADAM_LR, betas=ADAM_BETAS, eps=ADAM_EPS)
    opt.zero_grad(set_to_none=False)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
    assert logits.dtype == torch.bfloat16 and loss.dtype == torch.float32, (logits.dtype, loss.dtype)
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    norm = torch.nn.utils.clip_grad_norm_(params, CLIP)
    opt.step()
    out = [("batch.x", "I64", list(x.shape), x.reshape(-1).tolist()),
           ("batch.y", "I64", list(y.shape), y.reshape(-1).tolist()),
           ("loss", "F32", [1], [float(loss)]), ("norm", "F32", [1], [float(norm)]),
           ("logits", "F32", list(logits.shape), logits.float().reshape(-1).tolist())]
    names = [n for n, _ in model.named_parameters()]
    for prefix, table in (("grad", grads), ("adam", dict(model.named_parameters()))):
        for n in names:
            t = table[n].detach()
            out.append(("%s.%s" % (prefix, n), "F32", list(t.shape), t.reshape(-1).tolist()))
    meta = {"generator": "tests/reference/gpt.py autocast", "torch": torch.__version__,
            "model": os.path.basename(a.model), "data": os.path.basename(a.data),
            "description": "gpt_step.safetensors's batch and step under torch.autocast(\"cpu\", dtype=torch.bfloat16): "
                           "logits (bf16, stored as float32), loss, norm, grad.<p> (unclipped), adam.<p> (after "
                           "clipping to %g and one Adam step, lr %g)" % (CLIP, ADAM_LR)}
    st_write(a.out, out, meta)
    print("autocast bf16: loss %.9g, gradient norm %.9g" % (float(loss), float(norm)))
    print("wrote %s: %d tensors, %d bytes" % (a.out, len(out), os.path.getsize(a.out)))
    return 0


# ---------------------------------------------------------------------------
# train: `gpt train`'s loop, for side-by-side runs and timing
# ---------------------------------------------------------------------------

def held_out_loss(torch, model, ids, T, B):
    """Mean loss over the windows at multiples of T, as examples/gpt/eval.c."""
    T = min(T, len(ids) - 1)
    windows = (len(ids) - 1) // T
    total, count = 0.0, 0
    with torch.no_grad():
        for w in range(0, windows, B):
            b = min(B, windows - w)
            x = ids[w * T:(w + b) * T].view(b, T)
            y = ids[w * T + 1:(w + b) * T + 1].view(b, T)
            logits = model(x)
            total += float(torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1),
                                                             reduction="sum"))
            count += b * T
    return total / count


def cmd_train(torch, a):
    torch.manual_seed(a.seed)
    text = load_text(a.data)
    chars = bytes(sorted(set(text)))
    index = {c: i for i, c in enumerate(chars)}
    ids = torch.tensor([index[c] for c in text], dtype=torch.long)
    split = held_out_start(len(ids), a.context)
    cfg = dict(vocab=len(chars), context=a.context, hidden=a.hidden, heads=a.heads, ffn=a.ffn, layers=a.layers,
               untied=int(a.untied), activation=a.activation, dropout=a.dropout)
    model = define_model(torch)(cfg)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr, betas=ADAM_BETAS, eps=ADAM_EPS)
    print("%d characters (%d distinct), %d for training; %d parameters" %
          (len(ids), len(chars), split, sum(p.numel() for p in model.parameters())))
    T, B, step_seconds, interval, n_interval = a.context, a.batch, 0.0, 0.0, 0
    for step in range(1, a.steps + 1):
        at = torch.randint(0, split - T, (B,))
        x = torch.stack([ids[i:i + T] for i in at])
        y = torch.stack([ids[i + 1:i + T + 1] for i in at])
        t0 = time.perf_counter()
        loss = model.loss(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if a.clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip)
        opt.step()
        step_seconds += time.perf_counter() - t0
        interval += float(loss)
        n_interval += 1
        if step % a.eval_every == 0 or step == a.steps:
            model.eval()
            val = held_out_loss(torch, model, ids[split:], T, B)
            model.train()
            print("step %5d  loss %.4f  held-out %.4f (%.3f bits/char)  %.2f ms/step" %
                  (step, interval / n_interval, val, val / math.log(2), 1e3 * step_seconds / step))
            interval, n_interval = 0.0, 0
    return 0


# ---------------------------------------------------------------------------
# bench: the timings `make bench` puts beside attograd's
# ---------------------------------------------------------------------------

def best_ms(fn, budget):
    """Milliseconds per call of fn: the best round of several, about budget seconds in all."""
    fn()
    best, spent = float("inf"), 0.0
    while spent < budget or best == float("inf"):
        t0, n = time.perf_counter(), 0
        while True:
            fn()
            n += 1
            dt = time.perf_counter() - t0
            if n >= 2 and dt >= budget / 5:
                break
        best, spent = min(best, dt / n), spent + dt
    return 1e3 * best


def generate(torch, model, idx, n_new, context):
    """nanoGPT's generate (greedy): every token runs the model on the whole
    cropped window; no key/value cache."""
    for _ in range(n_new):
        logits = model(idx[:, -context:])[:, -1, :]
        idx = torch.cat((idx, logits.argmax(dim=-1, keepdim=True)), dim=1)
    return idx


def generate_cached(torch, model, idx, n_new, context):
    """The same tokens as generate(), with a key/value cache as attograd's
    ag_gpt_sample keeps: the window once, then one position per token; past
    the context the cropped window again from an empty cache."""
    F = torch.nn.functional
    caches = []

    def run(ids, pos):  # ids [1, T] at positions pos ..; the last position's logits
        T = ids.shape[1]
        x = model.embedding.tokens(ids) + model.embedding.positions.weight[pos:pos + T]
        for layer, b in enumerate(model.blocks):
            a, h = b.attention, b.norm1(x)
            C = h.shape[-1]
            split = lambda t: t.view(1, T, a.H, C // a.H).transpose(1, 2)  # noqa: E731
            q, k, v = split(a.w_q(h)), split(a.w_k(h)), split(a.w_v(h))
            if pos:
                k, v = torch.cat((caches[layer][0], k), dim=2), torch.cat((caches[layer][1], v), dim=2)
                caches[layer] = (k, v)
            else:
                caches.append((k, v))
            scores = q @ k.transpose(-1, -2) / math.sqrt(C // a.H)
            allowed = torch.ones(T, pos + T, dtype=torch.bool).tril(diagonal=pos)
            p = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
            x = x + a.w_o((p @ v).transpose(1, 2).reshape(1, T, C))
            x = x + b.ffn(b.norm2(x))
        x = model.norm(x[:, -1:])
        return (model.head(x) if model.head is not None else x @ model.embedding.tokens.weight.t())[:, -1, :]

    for _ in range(n_new):
        n = idx.shape[1]
        if caches and n <= context:
            logits = run(idx[:, -1:], n - 1)
        else:
            caches.clear()
            window = idx[:, -context:]
            logits = run(window, 0)
        idx = torch.cat((idx, logits.argmax(dim=-1, keepdim=True)), dim=1)
    return idx


def saved_bytes(torch, model, x, y):
    """Bytes autograd saves for backward in one training forward: every
    storage a saved tensor lives in, once, the parameters' aside."""
    params = {p.data_ptr() for p in model.parameters()}
    seen = {}

    def pack(t):
        s = t.storage()
        if s.data_ptr() not in params:
            seen[s.data_ptr()] = s.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model.loss(x, y)
    return sum(seen.values())


def cmd_bench(torch, a):
    import json
    torch.manual_seed(0)
    cfg = dict(vocab=a.vocab, context=a.context, hidden=a.hidden, heads=a.heads, ffn=a.ffn, layers=a.layers,
               untied=0, activation="gelu", dropout=0.0)
    model = define_model(torch)(cfg)
    opt = torch.optim.Adam(model.parameters(), lr=ADAM_LR, betas=ADAM_BETAS, eps=ADAM_EPS)
    x = torch.randint(0, a.vocab, (a.batch, a.context))
    y = torch.randint(0, a.vocab, (a.batch, a.context))

    def step():  # --autocast: the forward under autocast, the rest in float32 (PyTorch's recipe)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.autocast):
            loss = model.loss(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        opt.step()

    out = {"threads": torch.get_num_threads(), "step_ms": best_ms(step, a.seconds), "generate_tok_s": {}}
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.autocast):
        out["saved_bytes"] = saved_bytes(torch, model, x, y)
    if not a.new:  # training step only (make bench's scale section)
        print(json.dumps(out))
        return 0
    model.eval()
    prompt = torch.zeros((1, 1), dtype=torch.long)
    out["generate_cached_tok_s"] = {}
    with torch.no_grad():
        for n in (int(v) for v in a.new.split(",")):
            plain, cached = generate(torch, model, prompt, n, a.context), generate_cached(torch, model, prompt, n,
                                                                                          a.context)
            if not torch.equal(plain, cached):
                raise SystemExit("gpt.py bench: generate_cached gave other tokens than generate")
            ms = best_ms(lambda: generate(torch, model, prompt, n, a.context), a.seconds)
            out["generate_tok_s"][str(n)] = n / (ms / 1e3)
            ms = best_ms(lambda: generate_cached(torch, model, prompt, n, a.context), a.seconds)
            out["generate_cached_tok_s"][str(n)] = n / (ms / 1e3)
    print(json.dumps(out))
    return 0


def main(argv):
    p = argparse.ArgumentParser(prog="gpt.py", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("step", help="write the training-step parity fixture from a C checkpoint")
    s.add_argument("--model", required=True)
    s.add_argument("--data", required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--threads", type=int, default=1)
    c = sub.add_parser("autocast", help="write the same step under torch.autocast(\"cpu\", dtype=torch.bfloat16)")
    c.add_argument("--model", required=True)
    c.add_argument("--data", required=True)
    c.add_argument("--out", required=True)
    c.add_argument("--threads", type=int, default=1)
    t = sub.add_parser("train", help="train as `gpt train` does")
    t.add_argument("--data", required=True)
    t.add_argument("--steps", type=int, default=2000)
    t.add_argument("--batch", type=int, default=32)
    t.add_argument("--context", type=int, default=32)
    t.add_argument("--hidden", type=int, default=64)
    t.add_argument("--heads", type=int, default=4)
    t.add_argument("--ffn", type=int, default=256)
    t.add_argument("--layers", type=int, default=2)
    t.add_argument("--activation", choices=("gelu", "gelu_tanh", "relu"), default="gelu")
    t.add_argument("--untied", action="store_true")
    t.add_argument("--dropout", type=float, default=0.0)
    t.add_argument("--lr", type=float, default=1e-3)
    t.add_argument("--clip", type=float, default=1.0)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--eval-every", type=int, default=100)
    t.add_argument("--threads", type=int)
    b = sub.add_parser("bench", help="time a training step and a generate loop (for make bench)")
    b.add_argument("--threads", type=int, default=1)
    b.add_argument("--seconds", type=float, default=2.0)
    b.add_argument("--autocast", action="store_true", help="the forward under torch.autocast(\"cpu\", dtype=torch.bfloat16)")
    b.add_argument("--new", default="31,200", help="tokens to generate from a one-token prompt, comma-separated; empty: no generation")
    for name, default in (("vocab", 64), ("batch", 32), ("context", 32), ("hidden", 64), ("heads", 4), ("ffn", 256),
                          ("layers", 2)):
        b.add_argument("--" + name, type=int, default=default)
    a = p.parse_args(argv)
    torch = import_torch(a.threads)
    return {"step": cmd_step, "autocast": cmd_autocast, "train": cmd_train, "bench": cmd_bench}[a.cmd](torch, a)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
