#!/usr/bin/python3
"""classifier.py: the PyTorch twin of the encoder-only classifier
(examples/classify/): the same sentences, split, model, initial
distributions and training, under the same parameter names.

    # train as `classify` does (its flags and defaults), printing each
    # seed's held-out accuracy and their mean
    /usr/bin/python3 tests/reference/classifier.py train --data examples/data/eng-fra.tsv [--seeds 3]
        [--steps 400] [--batch 32] [--max-len 32] [--hidden 64] [--heads 4] [--ffn 128]
        [--layers 2] [--lr 1e-3] [--seed 0] [--threads 1] [--json FILE]

    # side-by-side timing for `make bench`: one JSON line with the
    # milliseconds of a training step (forward, backward, clip, Adam)
    /usr/bin/python3 tests/reference/classifier.py bench [--threads 1] [--seconds 2]

The model: x = concat(cls, embedding[bytes]) + positions[:T + 1]; pre-norm
blocks x = x + attention(norm1(x)), x = x + ffn(norm2(x)) (GELU, keys after a
sentence's end masked with -inf); logits = head(norm(x[:, 0])).  PyTorch cannot
draw the C program's random numbers, so the two agree statistically: the
same distributions for every parameter and batch, not the same draws.
"""
import argparse
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from translator import import_torch  # noqa: E402  (thread pools set before import)

LABEL_ENGLISH, LABEL_FRENCH = 0, 1


# ---------------------------------------------------------------------------
# the data: examples/classify/data.c
# ---------------------------------------------------------------------------

def load(path, max_len):
    """(train, held): lists of (bytes, label).  Every 10th distinct English
    sentence's lines are held out, the English sentence and its French."""
    train, held, prev, group = [], [], None, 0
    with open(path, "rb") as f:
        lines = f.read().split(b"\n")
    for lineno, line in enumerate(lines, 1):
        line = line[:-1] if line.endswith(b"\r") else line
        if not line:
            continue
        cols = line.split(b"\t")
        if len(cols) < 2 or not cols[0] or not cols[1]:
            raise SystemExit(f"classifier.py: {path}:{lineno}: need two tab-separated sentences")
        en, fr = cols[0], cols[1]
        if en != prev:
            group, prev = group + 1, en
            new = True
        else:
            new = False
        out = held if group % 10 == 0 else train
        if new:
            out.append((en[:max_len], LABEL_ENGLISH))
        out.append((fr[:max_len], LABEL_FRENCH))
    return train, held


def make_batch(torch, rows):
    """ids [B, T] (0 after a sentence's end), seen [B] (class token + bytes), labels [B]."""
    T = max(1, max(len(s) for s, _ in rows))
    ids = torch.zeros(len(rows), T, dtype=torch.long)
    for i, (s, _) in enumerate(rows):
        ids[i, :len(s)] = torch.tensor(list(s), dtype=torch.long)
    seen = torch.tensor([len(s) + 1 for s, _ in rows])
    labels = torch.tensor([lab for _, lab in rows])
    return ids, seen, labels


# ---------------------------------------------------------------------------
# the model: examples/classify/model.c over src/nn/transformer.c
# ---------------------------------------------------------------------------

def define_model(torch):
    nn, F = torch.nn, torch.nn.functional

    def xavier(linear):
        """the blocks' init (src/nn/transformer.c): Xavier-uniform weights, zero biases"""
        nn.init.xavier_uniform_(linear.weight)
        nn.init.zeros_(linear.bias)
        return linear

    class Attention(nn.Module):
        def __init__(self, C, H):
            super().__init__()
            self.H = H
            self.w_q, self.w_k, self.w_v, self.w_o = (xavier(nn.Linear(C, C)) for _ in range(4))

        def forward(self, x, keep):
            B, T, C = x.shape
            split = lambda t: t.view(B, T, self.H, C // self.H).transpose(1, 2)  # noqa: E731
            q, k, v = split(self.w_q(x)), split(self.w_k(x)), split(self.w_v(x))
            scores = q @ k.transpose(-1, -2) / math.sqrt(C // self.H)  # [B, H, T, T]
            p = torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1)
            return self.w_o((p @ v).transpose(1, 2).reshape(B, T, C))

    class Block(nn.Module):
        def __init__(self, C, H, Fw):
            super().__init__()
            self.attention, self.norm1 = Attention(C, H), nn.LayerNorm(C)
            self.dense1, self.dense2 = xavier(nn.Linear(C, Fw)), xavier(nn.Linear(Fw, C))
            self.norm2 = nn.LayerNorm(C)

        def forward(self, x, keep):
            x = x + self.attention(self.norm1(x), keep)
            return x + self.dense2(F.gelu(self.dense1(self.norm2(x))))

    class Classifier(nn.Module):
        def __init__(self, max_len, C, H, Fw, L):
            super().__init__()
            self.embedding = nn.Embedding(256, C)
            self.cls = nn.Parameter(torch.empty(1, 1, C))
            self.positions = nn.Embedding(max_len + 1, C)
            for p in (self.embedding.weight, self.cls, self.positions.weight):
                nn.init.normal_(p, 0, 0.02)
            self.blocks = nn.ModuleList(Block(C, H, Fw) for _ in range(L))
            self.norm = nn.LayerNorm(C)
            self.head = nn.Linear(C, 2)  # PyTorch's default init, as ag_linear_layer's

        def forward(self, ids, seen):
            B, T = ids.shape
            x = torch.cat([self.cls.expand(B, -1, -1), self.embedding(ids)], dim=1)
            x = x + self.positions.weight[:T + 1]
            keep = (torch.arange(T + 1)[None, :] < seen[:, None])[:, None, None, :]  # [B, 1, 1, T + 1]
            for block in self.blocks:
                x = block(x, keep)
            return self.head(self.norm(x[:, 0]))

    return Classifier


# ---------------------------------------------------------------------------
# train and bench
# ---------------------------------------------------------------------------

def build(torch, a, seed):
    torch.manual_seed(seed)
    model = define_model(torch)(a.max_len, a.hidden, a.heads, a.ffn, a.layers)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr, betas=(0.9, 0.999), eps=1e-8)
    return model, opt


def step(torch, model, opt, rows):
    ids, seen, labels = make_batch(torch, rows)
    loss = torch.nn.functional.cross_entropy(model(ids, seen), labels)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return loss.item()


def accuracy(torch, model, held, B):
    right = 0
    with torch.no_grad():
        for at in range(0, len(held), B):
            rows = held[at:at + B]
            ids, seen, labels = make_batch(torch, rows)
            right += (model(ids, seen).argmax(-1) == labels).sum().item()
    return right / len(held)


def cmd_train(torch, a):
    train, held = load(a.data, a.max_len)
    print(f"{len(train)} training and {len(held)} held-out sentences")
    accs = []
    for seed in range(a.seed, a.seed + a.seeds):
        model, opt = build(torch, a, seed)
        g = torch.Generator().manual_seed(seed)
        for s in range(1, a.steps + 1):
            picks = torch.randint(len(train), (a.batch,), generator=g).tolist()
            loss = step(torch, model, opt, [train[i] for i in picks])
            if not a.quiet and (s % 100 == 0 or s == a.steps):
                print(f"seed {seed} step {s} loss {loss:.4f}")
        accs.append(accuracy(torch, model, held, a.batch))
        print(f"seed {seed}: held-out accuracy {100 * accs[-1]:.2f}%")
    if a.seeds > 1:
        print(f"mean of {a.seeds} seeds: {100 * sum(accs) / len(accs):.2f}%")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"seeds": list(range(a.seed, a.seed + a.seeds)), "accuracy": accs,
                       "steps": a.steps, "torch": torch.__version__}, f, indent=1)
            f.write("\n")


def cmd_bench(torch, a):
    """ms per training step on batches of random sentences of the data's
    length distribution: the same work as `classify`'s steps."""
    train, _ = load(a.data, a.max_len)
    model, opt = build(torch, a, 0)
    g = torch.Generator().manual_seed(0)
    batches = [[train[i] for i in torch.randint(len(train), (a.batch,), generator=g).tolist()] for _ in range(64)]
    for rows in batches[:5]:
        step(torch, model, opt, rows)
    best, t_end, n = float("inf"), time.perf_counter() + a.seconds, 0
    while time.perf_counter() < t_end or n < 10:
        t0 = time.perf_counter()
        step(torch, model, opt, batches[n % len(batches)])
        best, n = min(best, time.perf_counter() - t0), n + 1
    print(json.dumps({"step_ms": 1e3 * best, "steps": n, "threads": torch.get_num_threads()}))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("train", "bench"):
        s = sub.add_parser(name)
        s.add_argument("--data", default="examples/data/eng-fra.tsv")
        s.add_argument("--steps", type=int, default=400)
        s.add_argument("--batch", type=int, default=32)
        s.add_argument("--max-len", type=int, default=32)
        s.add_argument("--hidden", type=int, default=64)
        s.add_argument("--heads", type=int, default=4)
        s.add_argument("--ffn", type=int, default=128)
        s.add_argument("--layers", type=int, default=2)
        s.add_argument("--lr", type=float, default=1e-3)
        s.add_argument("--seed", type=int, default=0)
        s.add_argument("--seeds", type=int, default=1)
        s.add_argument("--threads", type=int, default=1)
        s.add_argument("--seconds", type=float, default=2.0)
        s.add_argument("--json")
        s.add_argument("--quiet", action="store_true")
    a = p.parse_args()
    torch = import_torch(a.threads)
    {"train": cmd_train, "bench": cmd_bench}[a.cmd](torch, a)


if __name__ == "__main__":
    main()
