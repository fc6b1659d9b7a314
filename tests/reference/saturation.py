#!/usr/bin/python3
"""saturation.py: how saturated the first encoder layer's softmax is.

    /usr/bin/python3 tests/reference/saturation.py MODEL "i lost ."

MODEL is a translator checkpoint, written by `translate train` or by
`translator.py train --out` (the same format).  For the sentence (its tokens
and <eos>, as the translator encodes it) it computes encoder layer 0's
scaled scores, S = Q K^T / sqrt(D) per head, from the checkpoint's weights
in double precision with numpy, and prints

  - the largest |S|;
  - the largest gap in a row, max_s S[t, s] - min_s S[t, s];
  - how many attention weights softmax(S) are exactly 0 in float32, where
    the model trains (nothing is masked: the sentence has no padding).

A row whose gap is above about 104 is a one-hot in float32, and its softmax
passes no gradient (dS = P * (dP - rowsum(dP * P)) = 0 for a one-hot P).
Used for the numbers in examples/README.md, step 3.
"""
import json
import math
import struct
import sys

import numpy as np


def read_checkpoint(path):
    """The tensors (as float64 arrays) and the metadata of a safetensors file."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    body = data[8 + n:]
    dtypes = {"F32": np.float32, "F64": np.float64}
    tensors = {}
    for name, h in header.items():
        if h["dtype"] not in dtypes:
            continue
        b, e = h["data_offsets"]
        tensors[name] = np.frombuffer(body[b:e], dtype=dtypes[h["dtype"]]).reshape(h["shape"]).astype(np.float64)
    return tensors, meta


def positions(T, C):
    """P[t, 2i] = sin(t / 10000^(2i/C)), P[t, 2i+1] = cos(...), as ag_positional_encoding."""
    p = np.zeros((T, C))
    for t in range(T):
        for i in range(0, C, 2):
            angle = t / math.pow(10000.0, i / C)
            p[t, i] = math.sin(angle)
            if i + 1 < C:
                p[t, i + 1] = math.cos(angle)
    return p


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: saturation.py MODEL SENTENCE")
    w, meta = read_checkpoint(sys.argv[1])
    vocab = meta["src_vocab"].split("\n")
    H = int(meta.get("heads", 4))
    ids = [vocab.index(tok) if tok in vocab else vocab.index("<unk>") for tok in sys.argv[2].split()]
    ids.append(vocab.index("<eos>"))
    E = w["encoder.embedding.weight"]
    S, C = len(ids), E.shape[1]
    D = C // H
    x = E[ids] * math.sqrt(C) + positions(S, C)

    def linear(prefix, x):
        y = x @ w[prefix + ".weight"].T
        return y + w[prefix + ".bias"] if prefix + ".bias" in w else y

    def heads(y):  # [S, C] -> [H, S, D]
        return y.reshape(S, H, D).transpose(1, 0, 2)

    q = heads(linear("encoder.blocks.0.attention.w_q", x))
    k = heads(linear("encoder.blocks.0.attention.w_k", x))
    scores = q @ k.transpose(0, 2, 1) / math.sqrt(D)  # [H, S, S]
    p = np.exp(scores - scores.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    print("encoder layer 0, %d heads, %d tokens: largest |scaled score| %.1f, largest row gap %.1f, "
          "weights exactly 0 in float32: %d of %d"
          % (H, S, np.abs(scores).max(), (scores.max(-1) - scores.min(-1)).max(),
             int((p.astype(np.float32) == 0).sum()), p.size))


if __name__ == "__main__":
    main()
