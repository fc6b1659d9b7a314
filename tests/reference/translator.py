#!/usr/bin/python3
"""translator.py: a PyTorch reference of attograd's toy translator.

Run with Debian's PyTorch (apt-get install python3-torch), i.e. with
/usr/bin/python3, not another python3 that may come first on PATH:

    /usr/bin/python3 tests/reference/translator.py train --data FILE [--test FILE]
        [--epochs 30] [--batch 64] [--optimizer sgd|adam] [--lr X] [--momentum X]
        [--weight-decay X] [--clip 1.0] [--hidden 64] [--heads 4] [--ffn 128]
        [--layers 2] [--dropout 0.1] [--max-len 10] [--min-freq 2] [--seed 0] [--init scaled|d2l]
        [--pre-norm|--post-norm] [--qk-norm] [--threads N] [--json FILE] [--out MODEL] [--quiet]
    /usr/bin/python3 tests/reference/translator.py step --model C_CHECKPOINT
        --data FILE --out FIXTURE.safetensors
    /usr/bin/python3 tests/reference/translator.py lockstep --model C_INIT --data FILE
        --trace C_TRACE [--dtype float64|float32] [--final C_CHECKPOINT] [--perturb EPS]
        [the recipe flags of train] [--json FILE]
    /usr/bin/python3 tests/reference/translator.py split --data FILE
        --train TRAIN.tsv --test TEST.tsv [--every 10]
    /usr/bin/python3 tests/reference/translator.py initcheck --model C_CHECKPOINT
        [--init scaled|d2l] [--quiet]

It is the same program as examples/translate/ + src/nn/seq2seq.c, written
again with torch.nn, so that the C code can be checked against it:

  * the data pipeline of src/text/text.c: d2l's preprocessing byte for byte (NBSP
    and U+202F -> ' ', ASCII and Latin-1 lowercasing, a space before , . ! ?),
    tokens split at ' ', the same bad-line rules, vocabularies with ids
    0..3 = <pad> <bos> <eos> <unk> and then the tokens seen >= min_freq times
    by decreasing count, ties in byte order;
  * the model of src/nn/seq2seq.c, parameter for parameter under the same names
    ("encoder.blocks.0.attention.w_q.weight"): embeddings scaled by sqrt(C)
    plus sinusoidal positions, then dropout; pre-norm encoder and decoder
    blocks, x + dropout(sublayer(LayerNorm(x))), and a final LayerNorm per
    stack ("encoder.norm", "decoder.norm"), as translate train's default, or
    with --post-norm LayerNorm(x + dropout(sublayer(x))) and no final norm
    (the C library's default, ag_seq2seq_config); --qk-norm: a LayerNorm of each head's
    q and k ("<attention>.q_norm", ".k_norm", width D); dropout on the attention
    weights; masked scores filled with -inf; a final dense layer; the loss is
    the cross-entropy averaged over the target tokens that are not <pad>;
  * the training loop of examples/translate/: a shuffle per epoch, batches
    trimmed to their longest source and target, clip_grad_norm_, SGD with
    momentum or Adam with betas (0.9, 0.98) and eps 1e-9; and its `evaluate`:
    greedy decoding, exact match, d2l's BLEU (k = 2, the best over the
    references of each distinct source) and the ceiling (the share of
    sources with a reference the model could produce at all).

PyTorch cannot draw the C program's random numbers (initial weights, shuffles,
dropout masks), so `train` agrees with `translate train` statistically, not bit
for bit.  `lockstep` takes a C run's own steps: from the checkpoint that
`translate train --save-init` wrote before step 1, the batches its `--trace`
lists, dropout off, printing both losses per step.  `step` is the exact comparison: from a checkpoint the C program
wrote it computes, dropout off, the loss of one fixed batch, its gradients and
one SGD and one Adam step, in float32 and in float64, and writes them to a
fixture for tests/test_parity_translator.c.

Safetensors files are read and written by hand (struct + json).
"""
import argparse
import collections
import json
import math
import os
import struct
import sys
import time

PAD, BOS, EOS, UNK = 0, 1, 2, 3
SPECIALS = [b"<pad>", b"<bos>", b"<eos>", b"<unk>"]
FORMAT = "attograd-translator-1"
MAX_LINE = 4096  # AG_PAIRS_MAX_LINE


# ---------------------------------------------------------------------------
# text: src/text/text.c, on bytes
# ---------------------------------------------------------------------------

def preprocess(s):
    """ag_text_preprocess: bytes -> bytes."""
    out = bytearray()
    prev_space = False
    n = len(s)
    i = 0

    def at(k):
        return s[k] if k < n else 0

    while i < n:
        b0, b1, b2 = s[i], at(i + 1), at(i + 2)
        used = 1
        c = bytes([b0])
        if b0 == 0xC2 and b1 == 0xA0:  # U+00A0 no-break space
            c, used = b" ", 2
        elif b0 == 0xE2 and b1 == 0x80 and b2 == 0xAF:  # U+202F narrow no-break space
            c, used = b" ", 3
        elif 0x41 <= b0 <= 0x5A:  # A-Z
            c = bytes([b0 + 0x20])
        elif b0 == 0xC3 and 0x80 <= b1 <= 0x9E and b1 != 0x97:  # U+00C0..U+00DE, not U+00D7
            c, used = bytes([0xC3, b1 + 0x20]), 2
        elif b0 == 0xC5 and b1 == 0x92:  # U+0152 -> U+0153
            c, used = b"\xc5\x93", 2
        if i > 0 and not prev_space and c in (b",", b".", b"!", b"?"):
            out += b" "
        out += c
        prev_space = c == b" "
        i += used
    return bytes(out)


def tokenize(s):
    return [t for t in s.split(b" ") if t]


def line_problem(line):
    """Why a line is skipped (ag_pairs_parse's rules, in its order), or None."""
    if not line:
        return "empty line"
    if len(line) > MAX_LINE:
        return "line is %d bytes long, more than %d" % (len(line), MAX_LINE)
    if b"\0" in line:
        return "NUL byte"
    try:
        line.decode("utf-8")  # strict: no overlongs, surrogates or > U+10FFFF, as utf8_bad_at
    except UnicodeDecodeError:
        return "invalid UTF-8"
    if b"\t" not in line:
        return "no tab between source and target"
    return None


def load_pairs(path):
    """Sentence pairs (src tokens, tgt tokens) of a TSV file, as ag_pairs_load."""
    with open(path, "rb") as f:
        data = f.read()
    lines = data.split(b"\n")
    if data.endswith(b"\n"):
        lines.pop()
    if not data:
        lines = []
    pairs, skipped = [], 0
    for line in lines:
        if line.endswith(b"\r"):
            line = line[:-1]
        if line_problem(line):
            skipped += 1
            continue
        src, rest = line.split(b"\t", 1)
        tgt = rest.split(b"\t", 1)[0]  # a third column is credits
        s, t = tokenize(preprocess(src)), tokenize(preprocess(tgt))
        if not s or not t:
            skipped += 1
            continue
        pairs.append((s, t))
    if not pairs:
        sys.exit("%s: no usable sentence pairs" % path)
    return pairs, skipped


class Vocab:
    def __init__(self, tokens):
        assert tokens[:4] == SPECIALS, tokens[:4]
        self.tokens = list(tokens)
        self.ids = {t: i for i, t in enumerate(tokens)}

    @classmethod
    def build(cls, seqs, min_freq):
        """ag_vocab_build: specials, then count >= min_freq, by decreasing count, ties in byte order."""
        counts = collections.Counter(t for seq in seqs for t in seq if t not in SPECIALS)
        kept = sorted((t for t, c in counts.items() if c >= min_freq), key=lambda t: (-counts[t], t))
        return cls(SPECIALS + kept)

    @classmethod
    def parse(cls, text):
        return cls(text.encode("utf-8").split(b"\n"))

    def serialize(self):
        return b"\n".join(self.tokens).decode("utf-8")

    def __len__(self):
        return len(self.tokens)

    def id(self, tok):
        return self.ids.get(tok, UNK)


def encode(vocab, tokens, L):
    """ag_encode: ids, then <eos>, cut to L, padded to L; returns (ids, valid)."""
    ids = [vocab.id(t) for t in tokens[:L]]
    if len(ids) < L:
        ids.append(EOS)
    valid = len(ids)
    return ids + [PAD] * (L - valid), valid


def bleu(pred, label, k=2):
    """d2l's BLEU (ag_bleu): clipped n-gram precisions weighted 1/2^n, brevity penalty."""
    len_pred, len_label = len(pred), len(label)
    if len_pred == 0:
        return 0.0
    score = math.exp(min(0.0, 1.0 - len_label / len_pred))
    for n in range(1, min(k, len_pred) + 1):
        num_matches = 0
        label_subs = collections.Counter(tuple(label[i:i + n]) for i in range(len_label - n + 1))
        for i in range(len_pred - n + 1):
            g = tuple(pred[i:i + n])
            if label_subs[g] > 0:
                num_matches += 1
                label_subs[g] -= 1
        score *= math.pow(num_matches / (len_pred - n + 1), math.pow(0.5, n))
    return score


# ---------------------------------------------------------------------------
# safetensors, by hand
# ---------------------------------------------------------------------------

DTYPES = {"F32": ("f", 4), "F64": ("d", 8), "I64": ("q", 8), "I32": ("i", 4)}


def st_read(path):
    """(tensors {name: (dtype, shape, flat list)}, metadata {key: value})."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {})
    body = data[8 + n:]
    tensors = {}
    for name, h in header.items():
        code, size = DTYPES[h["dtype"]]
        b, e = h["data_offsets"]
        count = (e - b) // size
        tensors[name] = (h["dtype"], h["shape"], struct.unpack("<%d%s" % (count, code), body[b:e]))
    return tensors, meta


def st_write(path, tensors, meta):
    """tensors: list of (name, dtype, shape, flat values), in file order."""
    header, chunks, offset = {}, [], 0
    for name, dtype, shape, values in tensors:
        code, _ = DTYPES[dtype]
        chunk = struct.pack("<%d%s" % (len(values), code), *values)
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(chunk)]}
        chunks.append(chunk)
        offset += len(chunk)
    header["__metadata__"] = meta
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-(8 + len(text)) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for c in chunks:
            f.write(c)
    os.replace(tmp, path)


def import_torch(threads):
    """torch, its thread pools (OpenMP, MKL, OpenBLAS, intra- and inter-op) at
    `threads` when given: the variables are set before torch is imported, so
    that the pools start at this size.  Shared with gpt.py."""
    if threads:
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            os.environ[var] = str(threads)
    import torch
    if threads:
        torch.set_num_threads(threads)
        torch.set_num_interop_threads(threads)
    return torch


# ---------------------------------------------------------------------------
# the model: src/nn/seq2seq.c, src/nn/transformer.c, src/nn/attention.c
# (torch is imported in main, by import_torch, after the thread settings)
# ---------------------------------------------------------------------------

def define_model(torch):
    nn, F = torch.nn, torch.nn.functional

    def attention(q, k, v, mask, p_drop, training, record=None):
        """softmax(Q K^T / sqrt(D), -inf where mask is False), dropout, times V.
        record (a list) gets the scaled scores, before the mask, and P."""
        D = q.shape[-1]
        scores = torch.matmul(q, k.transpose(-1, -2)) * (1 / math.sqrt(D))
        scaled = scores
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        P = torch.softmax(scores, dim=-1)
        if record is not None:
            record.append((scaled.detach(), P.detach()))
        if training and p_drop > 0:
            P = F.dropout(P, p_drop, training=True)
        return torch.matmul(P, v)

    class MHA(nn.Module):
        def __init__(self, C, H, dropout, qk_norm=False):
            super().__init__()
            self.H, self.dropout = H, dropout
            self.record = None  # a list: attention() appends (scores, P)
            self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(C, C) for _ in range(4))
            # QK-norm (ViT-22B, OLMo-2): LayerNorm over each head's D values
            # of q and k, before the dot product (ag_mha_layer_add_qk_norm)
            self.q_norm = nn.LayerNorm(C // H, eps=1e-5) if qk_norm else None
            self.k_norm = nn.LayerNorm(C // H, eps=1e-5) if qk_norm else None

        def split(self, x):  # [B, T, C] -> [B, H, T, D]
            B, T, C = x.shape
            return x.reshape(B, T, self.H, C // self.H).permute(0, 2, 1, 3)

        def forward(self, x_q, x_kv, mask):
            q, k, v = self.split(self.w_q(x_q)), self.split(self.w_k(x_kv)), self.split(self.w_v(x_kv))
            if self.q_norm is not None:
                q, k = self.q_norm(q), self.k_norm(k)
            o = attention(q, k, v, mask, self.dropout, self.training, self.record)
            B, H, T, D = o.shape
            return self.w_o(o.permute(0, 2, 1, 3).reshape(B, T, H * D))

    class FFN(nn.Module):
        def __init__(self, C, Fw):
            super().__init__()
            self.dense1, self.dense2 = nn.Linear(C, Fw), nn.Linear(Fw, C)

        def forward(self, x):
            return self.dense2(torch.relu(self.dense1(x)))

    def sublayer(norm, x, f, pre, p, training):
        """post-norm: norm(x + dropout(f(x))); pre-norm: x + dropout(f(norm(x)))"""
        y = f(norm(x) if pre else x)
        if training and p > 0:
            y = F.dropout(y, p, training=True)
        return x + y if pre else norm(x + y)

    class EncoderBlock(nn.Module):
        def __init__(self, C, H, Fw, dropout, pre_norm=False, qk_norm=False):
            super().__init__()
            self.dropout, self.pre = dropout, pre_norm
            self.attention = MHA(C, H, dropout, qk_norm)
            self.norm1 = nn.LayerNorm(C, eps=1e-5)
            self.ffn = FFN(C, Fw)
            self.norm2 = nn.LayerNorm(C, eps=1e-5)

        def forward(self, x, src_mask):
            p, tr = self.dropout, self.training
            x = sublayer(self.norm1, x, lambda h: self.attention(h, h, src_mask), self.pre, p, tr)
            return sublayer(self.norm2, x, self.ffn, self.pre, p, tr)

    class DecoderBlock(nn.Module):
        def __init__(self, C, H, Fw, dropout, pre_norm=False, qk_norm=False):
            super().__init__()
            self.dropout, self.pre = dropout, pre_norm
            self.self_attention = MHA(C, H, dropout, qk_norm)
            self.norm1 = nn.LayerNorm(C, eps=1e-5)
            self.cross_attention = MHA(C, H, dropout, qk_norm)
            self.norm2 = nn.LayerNorm(C, eps=1e-5)
            self.ffn = FFN(C, Fw)
            self.norm3 = nn.LayerNorm(C, eps=1e-5)

        def forward(self, x, enc, causal, src_mask):
            p, tr = self.dropout, self.training
            x = sublayer(self.norm1, x, lambda h: self.self_attention(h, h, causal), self.pre, p, tr)
            # pre-norm: the encoder's output is used as it is (nn.TransformerDecoderLayer)
            x = sublayer(self.norm2, x, lambda h: self.cross_attention(h, enc, src_mask), self.pre, p, tr)
            return sublayer(self.norm3, x, self.ffn, self.pre, p, tr)

    class Encoder(nn.Module):
        def __init__(self, V, C, H, Fw, N, dropout, pre_norm=False, qk_norm=False):
            super().__init__()
            self.embedding = nn.Embedding(V, C)
            self.blocks = nn.ModuleList(EncoderBlock(C, H, Fw, dropout, pre_norm, qk_norm) for _ in range(N))
            # pre-norm: a final LayerNorm after the stack (nn.Transformer, norm_first=True)
            self.norm = nn.LayerNorm(C, eps=1e-5) if pre_norm else None

    class Decoder(nn.Module):
        def __init__(self, V, C, H, Fw, N, dropout, pre_norm=False, qk_norm=False):
            super().__init__()
            self.embedding = nn.Embedding(V, C)
            self.blocks = nn.ModuleList(DecoderBlock(C, H, Fw, dropout, pre_norm, qk_norm) for _ in range(N))
            self.norm = nn.LayerNorm(C, eps=1e-5) if pre_norm else None
            self.dense = nn.Linear(C, V)

    class Seq2Seq(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            self.cfg = cfg
            C, H, Fw, N, p = cfg["hidden"], cfg["heads"], cfg["ffn"], cfg["layers"], cfg["dropout"]
            pre, qk = bool(cfg.get("pre_norm")), bool(cfg.get("qk_norm"))
            self.encoder = Encoder(cfg["src_vocab"], C, H, Fw, N, p, pre, qk)
            self.decoder = Decoder(cfg["tgt_vocab"], C, H, Fw, N, p, pre, qk)
            # P[t, 2i] = sin(t / 10000^(2i/C)), P[t, 2i+1] = cos(...): computed
            # in double and rounded, as ag_positional_encoding
            P = [[0.0] * C for _ in range(cfg["max_len"])]
            for t in range(cfg["max_len"]):
                for i in range(0, C, 2):
                    angle = t / math.pow(10000.0, i / C)
                    P[t][i] = math.sin(angle)
                    if i + 1 < C:
                        P[t][i + 1] = math.cos(angle)
            self.register_buffer("positions", torch.tensor(P, dtype=torch.float64), persistent=False)

        def init_weights(self, kind="scaled"):
            """The C init's distributions (not its numbers), ag_seq2seq_init.

            scaled: embeddings N(0, 1/C) (times sqrt(C) in embed: unit
                    variance, like the positions), linear weights
                    Xavier-uniform, biases 0;
            d2l:    what d2l's train_seq2seq does to its Transformer:
                    nn.Embedding's default N(0, 1), Xavier-uniform on every
                    nn.Linear weight, nn.Linear's default bias
                    U(-1/sqrt(in), 1/sqrt(in)) where d2l has a bias (the FFN
                    and the output layer) and 0 on the attention projections
                    (d2l builds them without a bias).
            LayerNorm gain 1 and bias 0 in both."""
            C = self.cfg["hidden"]
            with torch.no_grad():
                for name, m in self.named_modules():
                    if isinstance(m, nn.Embedding):
                        nn.init.normal_(m.weight, 0.0, 1.0 if kind == "d2l" else 1 / math.sqrt(C))
                    elif isinstance(m, nn.Linear):
                        nn.init.xavier_uniform_(m.weight)
                        projection = name.rsplit(".", 1)[-1] in ("w_q", "w_k", "w_v", "w_o")
                        if kind == "d2l" and not projection:
                            k = 1 / math.sqrt(m.in_features)
                            nn.init.uniform_(m.bias, -k, k)
                        else:
                            nn.init.zeros_(m.bias)

        def embed(self, table, ids):
            """dropout(E[ids] * sqrt(C) + P[:L])"""
            L = ids.shape[1]
            assert L <= self.cfg["max_len"], (L, self.cfg["max_len"])
            x = table(ids) * math.sqrt(self.cfg["hidden"]) + self.positions[:L].to(table.weight.dtype)
            if self.training and self.cfg["dropout"] > 0:
                x = F.dropout(x, self.cfg["dropout"], training=True)
            return x

        def encode(self, src, src_valid):
            S = src.shape[1]
            mask = (torch.arange(S)[None, :] < src_valid[:, None])[:, None, None, :]  # [B, 1, 1, S]
            x = self.embed(self.encoder.embedding, src)
            for b in self.encoder.blocks:
                x = b(x, mask)
            if self.encoder.norm is not None:
                x = self.encoder.norm(x)
            return x, mask

        def decode(self, enc, src_mask, tgt_in):
            T = tgt_in.shape[1]
            causal = torch.ones(T, T, dtype=torch.bool).tril()
            y = self.embed(self.decoder.embedding, tgt_in)
            for b in self.decoder.blocks:
                y = b(y, enc, causal, src_mask)
            if self.decoder.norm is not None:
                y = self.decoder.norm(y)
            return self.decoder.dense(y)

        def loss(self, src, src_valid, tgt_in, tgt_out):
            enc, mask = self.encode(src, src_valid)
            logits = self.decode(enc, mask, tgt_in)
            return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1), ignore_index=PAD)

        @torch.no_grad()
        def greedy(self, src, src_valid, max_len):
            """ag_seq2seq_greedy's tokens: the encoder once, then the whole prefix again at each step."""
            training = self.training
            self.eval()
            B = src.shape[0]
            max_len = min(max_len, self.cfg["max_len"])
            enc, mask = self.encode(src, src_valid)
            prefix = torch.zeros(B, max_len, dtype=torch.long)
            prefix[:, 0] = BOS
            out = [[] for _ in range(B)]
            done = [False] * B
            for t in range(max_len):
                logits = self.decode(enc, mask, prefix[:, :t + 1])
                best = logits[:, t].argmax(-1).tolist()  # first of equal maxima, as the C loop
                all_done = True
                for b in range(B):
                    if done[b]:
                        continue
                    if best[b] == EOS:
                        done[b] = True
                        continue
                    out[b].append(best[b])
                    if t + 1 < max_len:
                        prefix[b, t + 1] = best[b]
                    all_done = False
                if all_done:
                    break
            self.train(training)
            return out

    return Seq2Seq


# ---------------------------------------------------------------------------
# data as id tensors, batches (examples/translate/)
# ---------------------------------------------------------------------------

class Dataset:
    def __init__(self, torch, pairs, sv, tv, L):
        src, sval, tout, tval = [], [], [], []
        for s, t in pairs:
            ids, v = encode(sv, s, L)
            src.append(ids), sval.append(v)
            ids, v = encode(tv, t, L)
            tout.append(ids), tval.append(v)
        self.n = len(pairs)
        self.src = torch.tensor(src, dtype=torch.long)
        self.src_valid = torch.tensor(sval, dtype=torch.long)
        self.tgt_out = torch.tensor(tout, dtype=torch.long)
        self.tgt_valid = torch.tensor(tval, dtype=torch.long)
        # teacher forcing: <bos>, then the target shifted right by one
        self.tgt_in = torch.cat([torch.full((self.n, 1), BOS, dtype=torch.long), self.tgt_out[:, :-1]], 1)

    def batch(self, idx):
        """Rows idx, trimmed to the longest source (S) and target (T) among them."""
        sv, tv = self.src_valid[idx], self.tgt_valid[idx]
        S, T = max(1, int(sv.max())), max(1, int(tv.max()))
        return (self.src[idx, :S], sv, self.tgt_in[idx, :T], self.tgt_out[idx, :T], int(tv.sum()))


def build_vocabs(pairs, min_freq):
    return (Vocab.build([s for s, _ in pairs], min_freq), Vocab.build([t for _, t in pairs], min_freq))


def dataset_loss(torch, model, d, B):
    """Mean loss per target token over d, dropout off (dataset_loss in translate.c)."""
    training = model.training
    model.eval()
    total, tokens = 0.0, 0
    with torch.no_grad():
        for at in range(0, d.n, B):
            src, sv, tin, tout, tok = d.batch(torch.arange(at, min(at + B, d.n)))
            total += float(model.loss(src, sv, tin, tout)) * tok
            tokens += tok
    model.train(training)
    return total / tokens if tokens else float("nan")


PROBE = 64  # the probe batch: the first PROBE pairs of the training data


def attention_stats(torch, model, d):
    """Per attention layer, on the probe batch (dropout off), as translate's
    --json "attention": the mean row entropy of the weights (nats, over the
    real query rows and the heads), the largest scaled score q.k/sqrt(D) a
    real query gives a key it may see, and the largest row gap (max - min of
    those scores in one row).  A list of {layer, entropy, max_score, max_gap}
    in the order encoder self 0..N-1, decoder self 0..N-1, decoder cross
    0..N-1."""
    n = min(PROBE, d.n)
    src, svl, tin, tout, _ = d.batch(torch.arange(n))
    tvl = d.tgt_valid[:n]
    mhas = {"encoder.self": [b.attention for b in model.encoder.blocks],
            "decoder.self": [b.self_attention for b in model.decoder.blocks],
            "decoder.cross": [b.cross_attention for b in model.decoder.blocks]}
    for ms in mhas.values():
        for m in ms:
            m.record = []
    training = model.training
    model.eval()
    with torch.no_grad():
        model.loss(src, svl, tin, tout)
    model.train(training)
    S, T = src.shape[1], tin.shape[1]
    s_real = torch.arange(S)[None, :] < svl[:, None]  # [B, S]
    t_real = torch.arange(T)[None, :] < tvl[:, None]  # [B, T]
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    allowed = {"encoder.self": s_real[:, None, :, None] & s_real[:, None, None, :],
               "decoder.self": t_real[:, None, :, None] & causal[None, None],
               "decoder.cross": t_real[:, None, :, None] & s_real[:, None, None, :]}
    out = []
    for kind, ms in mhas.items():
        for i, m in enumerate(ms):
            z, P = m.record[0]
            m.record = None
            ok = allowed[kind].expand(z.shape)
            rows = ok.any(-1)  # [B, H, Tq]: the real query rows
            ent = -(torch.where(P > 0, P * torch.log(torch.where(P > 0, P, torch.ones_like(P))),
                                torch.zeros_like(P))).sum(-1)
            hi = torch.where(ok, z, torch.full_like(z, -math.inf)).max(-1).values
            lo = torch.where(ok, z, torch.full_like(z, math.inf)).min(-1).values
            out.append({"layer": "%s.%d" % (kind, i), "entropy": float(ent[rows].mean()),
                        "max_score": float(hi[rows].max()), "max_gap": float((hi - lo)[rows].max())})
    return out


def evaluate(torch, model, pairs, sv, tv, L):
    """examples/translate/'s evaluate: greedy translations of the distinct
    sources (in order of first appearance), scored against all their
    references.  Returns (sources, exact, bleu, ceiling)."""
    groups = collections.OrderedDict()
    for s, t in pairs:
        groups.setdefault(tuple(s), []).append(t)
    sources = list(groups)
    outs = []
    chunk = 64
    for at in range(0, len(sources), chunk):
        enc = [encode(sv, list(s), L) for s in sources[at:at + chunk]]
        S = max(v for _, v in enc)
        src = torch.tensor([ids[:S] for ids, _ in enc], dtype=torch.long)
        valid = torch.tensor([v for _, v in enc], dtype=torch.long)
        outs += model.greedy(src, valid, L)
    exact = bl = ceiling = 0.0
    for s, out in zip(sources, outs):
        pred = [tv.tokens[i] for i in out]
        refs = groups[s]
        exact += any(pred == r for r in refs)
        # reachable: every token in the vocabulary and room for <eos>
        ceiling += any(len(r) + 1 <= L and all(tv.id(x) != UNK for x in r) for r in refs)
        bl += max(bleu(pred, r, 2) for r in refs)
    n = len(sources)
    return n, exact / n, bl / n, ceiling / n


# ---------------------------------------------------------------------------
# train
# ---------------------------------------------------------------------------

def make_optimizer(torch, params, a, n):
    """translate's optimizer and schedule for a's flags and n training
    pairs: (optimizer, peak lr, warmup steps, total steps).  A warmup longer
    than the run is cut to a tenth of it; noam needs at least 1
    (examples/translate/, ag_lr_schedule)."""
    adam = a.optimizer == "adam"
    lr = a.lr if a.lr is not None else (1e-3 if adam else 0.3)
    momentum = a.momentum if a.momentum is not None else 0.9
    if adam:
        opt = torch.optim.Adam(params, lr=lr, betas=(0.9, 0.98), eps=1e-9, weight_decay=a.weight_decay)
    else:
        opt = torch.optim.SGD(params, lr=lr, momentum=momentum, weight_decay=a.weight_decay,
                              nesterov=a.nesterov and momentum > 0)
    total_steps, warmup = a.epochs * ((n + a.batch - 1) // a.batch), a.warmup
    if warmup >= total_steps:
        warmup = total_steps // 10
    if warmup < 1 and a.schedule == "noam":
        warmup = 1
    return opt, lr, warmup, total_steps


def cmd_train(torch, a):
    if a.hidden % a.heads:
        sys.exit("translator.py: --hidden %d is not divisible by --heads %d" % (a.hidden, a.heads))
    torch.manual_seed(a.seed)
    train_pairs, skipped = load_pairs(a.data)
    test_pairs = load_pairs(a.test)[0] if a.test else None
    sv, tv = build_vocabs(train_pairs, a.min_freq)
    L = a.max_len
    cfg = dict(src_vocab=len(sv), tgt_vocab=len(tv), hidden=a.hidden, heads=a.heads, ffn=a.ffn,
               layers=a.layers, max_len=L, dropout=a.dropout, init=a.init, pre_norm=a.pre_norm,
               qk_norm=a.qk_norm)
    model = define_model(torch)(cfg)
    model.init_weights(a.init)
    model.train()
    d = Dataset(torch, train_pairs, sv, tv, L)
    dt = Dataset(torch, test_pairs, sv, tv, L) if test_pairs else None
    params = list(model.parameters())
    opt, lr, warmup, total_steps = make_optimizer(torch, params, a, d.n)
    step = 0
    nparams = sum(p.numel() for p in params)
    if not a.quiet:
        print("train: %d pairs (%d skipped), vocab %d source / %d target, %d parameters, %s lr %g, "
              "torch %s, %d threads" % (d.n, skipped, len(sv), len(tv), nparams, a.optimizer, lr,
                                        torch.__version__, torch.get_num_threads()), flush=True)
    gen = torch.Generator().manual_seed(a.seed)
    attention0 = attention_stats(torch, model, d)  # before the first step
    B = a.batch
    history = []
    t_start = time.perf_counter()
    last_loss = float("nan")
    for epoch in range(a.epochs):
        order = torch.randperm(d.n, generator=gen)
        total, tokens = 0.0, 0
        t0, c0 = time.perf_counter(), time.process_time()
        for k in range(0, d.n, B):
            src, svl, tin, tout, tok = d.batch(order[k:k + B])
            loss = model.loss(src, svl, tin, tout)
            opt.zero_grad(set_to_none=False)
            loss.backward()
            if a.clip > 0:
                norm = torch.nn.utils.clip_grad_norm_(params, a.clip)
                if not math.isfinite(float(norm)):
                    sys.exit("translator.py: epoch %d: gradient norm is %g; stopping" % (epoch + 1, norm))
            step += 1
            if a.schedule != "constant" or warmup > 0:
                for group in opt.param_groups:
                    group["lr"] = lr_schedule(lr, step, warmup, total_steps, a.schedule)
            opt.step()
            total += float(loss) * tok
            tokens += tok
        dt_, cpu = time.perf_counter() - t0, time.process_time() - c0
        last_loss = total / tokens
        history.append({"epoch": epoch + 1, "loss": last_loss, "seconds": dt_, "cpu_seconds": cpu,
                        "attention": attention_stats(torch, model, d),
                        "tokens_per_s": tokens / dt_})
        if not math.isfinite(last_loss):
            sys.exit("translator.py: epoch %d: loss is %g" % (epoch + 1, last_loss))
        held = ""
        if dt is not None:  # not timed, as in translate
            history[-1]["test_loss"] = dataset_loss(torch, model, dt, B)
            held = "  held-out %.4f" % history[-1]["test_loss"]
        if not a.quiet:
            print("epoch %d/%d  loss %.4f%s  %.0f tok/s  %.1fs  (cpu %.1fs)"
                  % (epoch + 1, a.epochs, last_loss, held, tokens / dt_, dt_, cpu), flush=True)
    seconds = time.perf_counter() - t_start  # held-out losses included, as translate's
    if a.out:
        save_checkpoint(model, sv, tv, a.out)
    result = {"epochs": a.epochs, "loss": last_loss, "seconds": seconds, "init": a.init,
              "pre_norm": int(a.pre_norm), "qk_norm": int(a.qk_norm),
              "attention_init": attention0, "history": history,
              "threads": torch.get_num_threads(), "torch": torch.__version__}
    if dt is not None:
        test_loss = dataset_loss(torch, model, dt, B)
        n, exact, bl, ceiling = evaluate(torch, model, test_pairs, sv, tv, L)
        print("held-out: loss %.4f  sources %d  exact match %.3f  BLEU %.3f  ceiling %.3f"
              % (test_loss, n, exact, bl, ceiling), flush=True)
        result.update(test_loss=test_loss, sources=n, exact_match=exact, bleu=bl, ceiling=ceiling)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
            f.write("\n")
    return 0


def lr_schedule(base, step, warmup, total, kind):
    """ag_lr_schedule of src/nn/optim.c: linear warmup, then constant, linear or
    cosine decay to 0 at `total`; noam is base * min(sqrt(w/s), s/w)."""
    s, w = float(step), float(warmup)
    if kind == "noam":
        return base * min(math.sqrt(w / s), s / w)
    if step <= warmup:
        return base * s / w
    if kind == "constant":
        return base
    if step >= total:
        return 0.0
    progress = (s - w) / (total - w)
    if kind == "linear":
        return base * (1 - progress)
    return base * 0.5 * (1 + math.cos(math.pi * progress))


def save_checkpoint(model, sv, tv, path):
    """The weights in translate's format (F32), so `translate eval` and `run` can load them."""
    cfg = model.cfg
    tensors = [(name, "F32", list(p.shape), p.detach().float().reshape(-1).tolist())
               for name, p in model.named_parameters()]
    meta = {"format": FORMAT, "src_vocab": sv.serialize(), "tgt_vocab": tv.serialize()}
    for key in ("hidden", "heads", "ffn", "layers", "max_len"):
        meta[key] = str(cfg[key])
    meta["dropout"] = repr(float(cfg["dropout"]))
    if cfg.get("init", "scaled") != "scaled":
        meta["init"] = cfg["init"]
    for key in ("pre_norm", "qk_norm"):
        if cfg.get(key):
            meta[key] = "1"
    st_write(path, tensors, meta)


# ---------------------------------------------------------------------------
# step: the fixture of tests/test_parity_translator.c
# ---------------------------------------------------------------------------

STEP_BATCH = 8
SGD_LR, SGD_MOMENTUM = 0.1, 0.9
ADAM_LR, ADAM_BETAS, ADAM_EPS = 1e-3, (0.9, 0.98), 1e-9
CLIP = 1.0


def load_c_model(torch, path, dtype):
    tensors, meta = st_read(path)
    if meta.get("format") != FORMAT:
        sys.exit("%s: not a translator model (format %r)" % (path, meta.get("format")))
    sv, tv = Vocab.parse(meta["src_vocab"]), Vocab.parse(meta["tgt_vocab"])
    cfg = dict(src_vocab=len(sv), tgt_vocab=len(tv), hidden=int(meta["hidden"]), heads=int(meta["heads"]),
               ffn=int(meta["ffn"]), layers=int(meta["layers"]), max_len=int(meta["max_len"]),
               dropout=float(meta["dropout"]), pre_norm=meta.get("pre_norm") == "1",
               qk_norm=meta.get("qk_norm") == "1")
    model = define_model(torch)(cfg).to(dtype)
    names = [n for n, _ in model.named_parameters()]
    stored = [n for n in tensors if not n.startswith("optimizer.")]
    assert sorted(names) == sorted(stored), (set(names) ^ set(stored))
    with torch.no_grad():
        for name, p in model.named_parameters():
            dt, shape, values = tensors[name]
            assert dt in ("F32", "F64") and list(shape) == list(p.shape), (name, dt, shape, p.shape)
            stored = torch.float64 if dt == "F64" else torch.float32
            p.copy_(torch.tensor(values, dtype=stored).reshape(shape).to(dtype))
    model.eval()  # dropout off
    return model, sv, tv, meta


def step_results(torch, model, batch, optimizer):
    """Loss, clipped gradients, norm and the parameters after one step."""
    params = list(model.parameters())
    if optimizer == "sgd":
        opt = torch.optim.SGD(params, lr=SGD_LR, momentum=SGD_MOMENTUM)
    else:
        opt = torch.optim.Adam(params, lr=ADAM_LR, betas=ADAM_BETAS, eps=ADAM_EPS)
    opt.zero_grad(set_to_none=False)
    loss = model.loss(*batch)
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    norm = torch.nn.utils.clip_grad_norm_(params, CLIP)
    opt.step()
    after = {n: p.detach().clone() for n, p in model.named_parameters()}
    return float(loss), float(norm), grads, after


def cmd_step(torch, a):
    torch.manual_seed(0)
    pairs, _ = load_pairs(a.data)
    out, meta_out = [], {"generator": "tests/reference/translator.py step", "torch": torch.__version__,
                         "model": os.path.basename(a.model), "data": os.path.basename(a.data)}
    names = None
    for dtype, suffix, fdt in ((torch.float32, "", "F32"), (torch.float64, "64", "F64")):
        model, sv, tv, meta = load_c_model(torch, a.model, dtype)
        min_freq = int(meta.get("min_freq", a.min_freq))
        rsv, rtv = build_vocabs(pairs, min_freq)
        assert rsv.tokens == sv.tokens, "source vocabulary of %s differs from the checkpoint's" % a.data
        assert rtv.tokens == tv.tokens, "target vocabulary of %s differs from the checkpoint's" % a.data
        d = Dataset(torch, pairs, sv, tv, model.cfg["max_len"])
        # a fixed batch spread over the file, so that lengths (and padding) vary
        idx = torch.tensor([k * d.n // STEP_BATCH for k in range(STEP_BATCH)], dtype=torch.long)
        src, svl, tin, tout, _ = d.batch(idx)
        batch = (src, svl, tin, tout)
        if suffix == "":
            for name, t in (("batch.src", src), ("batch.src_valid", svl), ("batch.tgt_in", tin),
                            ("batch.tgt_out", tout)):
                out.append((name, "I64", list(t.shape), t.reshape(-1).tolist()))
        results = {}
        for optimizer in ("sgd", "adam"):
            m, *_ = load_c_model(torch, a.model, dtype)  # fresh checkpoint weights for each step
            results[optimizer] = step_results(torch, m, batch, optimizer)
        loss, norm, grads, _ = results["sgd"]
        assert results["adam"][0] == loss
        out.append(("loss" + suffix, fdt, [1], [loss]))
        out.append(("norm" + suffix, fdt, [1], [norm]))
        names = [n for n, _ in model.named_parameters()]
        for prefix, table in (("grad", grads), ("sgd", results["sgd"][3]), ("adam", results["adam"][3])):
            for n in names:
                t = table[n]
                out.append(("%s%s.%s" % (prefix, suffix, n), fdt, list(t.shape), t.reshape(-1).tolist()))
        print("%s: loss %.9g, gradient norm %.9g (before clipping to %g)" % (fdt, loss, norm, CLIP))
    meta_out["description"] = (
        "batch.*: rows k*n/8 (k < 8) of the data, trimmed; loss, norm (of the gradient, before clipping), "
        "grad.<p> (unclipped), sgd.<p> (after SGD lr %g momentum %g, clip %g) and adam.<p> (after Adam lr %g "
        "betas %s eps %g, clip %g), all from the checkpoint's weights with dropout off; computed in float32, "
        "and with suffix 64 in float64" % (SGD_LR, SGD_MOMENTUM, CLIP, ADAM_LR, ADAM_BETAS, ADAM_EPS, CLIP))
    st_write(a.out, out, meta_out)
    print("wrote %s: %d tensors, %d bytes" % (a.out, len(out), os.path.getsize(a.out)))
    return 0


# ---------------------------------------------------------------------------
# lockstep: the steps of a C run, taken again from its initial weights
# ---------------------------------------------------------------------------

def read_trace(path):
    """translate train --trace: a header, then per step (step, epoch, lr,
    loss, norm, tokens, pair indices)."""
    with open(path) as f:
        lines = f.read().splitlines()
    if not lines or lines[0].split("\t") != ["step", "epoch", "lr", "loss", "norm", "tokens", "pairs"]:
        sys.exit("%s: not a translate --trace file" % path)
    steps = []
    for line in lines[1:]:
        step, epoch, lr, loss, norm, tokens, pairs = line.split("\t")
        steps.append(dict(step=int(step), epoch=int(epoch), lr=float(lr), loss=float(loss), norm=float(norm),
                          tokens=int(tokens), pairs=[int(i) for i in pairs.split(",")]))
    return steps


def rel(a, b):
    """|a - b| relative to |b| (0 when both are 0)."""
    return abs(a - b) / abs(b) if b else abs(a - b)


def param_difference(torch, model, path):
    """The twin's parameters against the C checkpoint at path: the largest
    absolute difference of one value, and ||C - twin|| / ||twin|| over all."""
    tensors, _ = st_read(path)
    worst, d2, n2 = 0.0, 0.0, 0.0
    for name, p in model.named_parameters():
        dt, shape, values = tensors[name]
        c = torch.tensor(values, dtype=torch.float64).reshape(shape)
        t = p.detach().to(torch.float64)
        worst = max(worst, float((c - t).abs().max()))
        d2 += float(((c - t) ** 2).sum())
        n2 += float((t ** 2).sum())
    return worst, math.sqrt(d2 / n2)


def replay(torch, model, d, trace, a, path):
    """The steps of trace on model, with the recipe of a's flags: per step
    (loss, gradient norm before clipping, lr, target tokens)."""
    params = list(model.parameters())
    opt, lr, warmup, total_steps = make_optimizer(torch, params, a, d.n)
    out = []
    for k, s in enumerate(trace):
        if s["step"] != k + 1:
            sys.exit("%s: line %d is step %d, not %d" % (path, k + 2, s["step"], k + 1))
        src, svl, tin, tout, tok = d.batch(torch.tensor(s["pairs"], dtype=torch.long))
        loss = model.loss(src, svl, tin, tout)
        opt.zero_grad(set_to_none=False)
        loss.backward()
        if a.clip > 0:
            norm = float(torch.nn.utils.clip_grad_norm_(params, a.clip))
        else:
            norm = math.sqrt(sum(float((p.grad.double() ** 2).sum()) for p in params))
        step_lr = lr
        if a.schedule != "constant" or warmup > 0:
            step_lr = lr_schedule(lr, k + 1, warmup, total_steps, a.schedule)
            for group in opt.param_groups:
                group["lr"] = step_lr
        opt.step()
        out.append((float(loss), norm, step_lr, tok))
    return out


def cmd_lockstep(torch, a):
    """From the checkpoint `translate train --save-init` wrote, the steps its
    --trace lists, batch for batch (dropout off: the checkpoint's dropout
    must be 0), with the recipe of the flags; per step the twin's loss and
    gradient norm beside C's.  --final: C's checkpoint after the last step,
    compared with the twin's parameters.  --perturb EPS: the same steps
    again from the twin's weights times (1 + EPS z), z ~ N(0, 1) each: how
    much the run itself amplifies a difference of that size (rounding's,
    with EPS = 1e-16 in float64), beside C's difference."""
    dtype = torch.float64 if a.dtype == "float64" else torch.float32
    model, sv, tv, meta = load_c_model(torch, a.model, dtype)
    if float(meta["dropout"]) != 0:
        sys.exit("%s: dropout %s: lock-step needs a run with --dropout 0" % (a.model, meta["dropout"]))
    if meta.get("epoch", "0") != "0" or meta.get("optimizer_steps", "0") != "0":
        sys.exit("%s: not a checkpoint of step 0 (translate train --save-init)" % a.model)
    pairs, _ = load_pairs(a.data)
    rsv, rtv = build_vocabs(pairs, int(meta.get("min_freq", 2)))
    if rsv.tokens != sv.tokens or rtv.tokens != tv.tokens:
        sys.exit("%s: its vocabularies differ from the checkpoint's" % a.data)
    d = Dataset(torch, pairs, sv, tv, model.cfg["max_len"])
    trace = read_trace(a.trace)
    ours = replay(torch, model, d, trace, a, a.trace)
    result = {"dtype": a.dtype, "steps": len(trace), "torch": torch.__version__}
    if a.final:
        result["param_max_abs"], result["param_rel"] = param_difference(torch, model, a.final)
    self_ = None
    if a.perturb:
        again, *_ = load_c_model(torch, a.model, dtype)
        gen = torch.Generator().manual_seed(1)
        with torch.no_grad():
            for p in again.parameters():
                p.mul_(1 + a.perturb * torch.randn(p.shape, generator=gen, dtype=torch.float64).to(dtype))
        self_ = replay(torch, again, d, trace, a, a.trace)
    rows = []
    for k, (s, (loss, norm, lr, tok)) in enumerate(zip(trace, ours)):
        r = dict(step=k + 1, tokens=tok, c_tokens=s["tokens"], lr=lr, c_lr=s["lr"], loss=loss, c_loss=s["loss"],
                 norm=norm, c_norm=s["norm"], loss_rel=rel(s["loss"], loss), norm_rel=rel(s["norm"], norm))
        if self_:
            r["self_loss_rel"], r["self_norm_rel"] = rel(self_[k][0], loss), rel(self_[k][1], norm)
        rows.append(r)
        if not a.quiet and (k < 20 or (k + 1) % 50 == 0 or k + 1 == len(trace)):
            print("step %4d  loss %.17g  C %.17g  rel %.2e  norm rel %.2e%s"
                  % (k + 1, loss, s["loss"], r["loss_rel"], r["norm_rel"],
                     "  perturbed twin: rel %.2e" % r["self_loss_rel"] if self_ else ""), flush=True)
    n20 = rows[:20]
    result.update(max_loss_rel_20=max(r["loss_rel"] for r in n20), max_loss_rel=max(r["loss_rel"] for r in rows),
                  max_norm_rel=max(r["norm_rel"] for r in rows), lr_differs=sum(r["lr"] != r["c_lr"] for r in rows),
                  tokens_differ=sum(r["tokens"] != r["c_tokens"] for r in rows))
    # per step, to 3 digits: C's relative loss and gradient-norm differences
    # from the twin (and the perturbed twin's loss difference)
    for key in ("loss_rel", "norm_rel") + (("self_loss_rel",) if self_ else ()):
        result[key] = [float("%.3g" % r[key]) for r in rows]
    if self_:
        result["perturb"] = a.perturb
        result["self_max_loss_rel_20"] = max(r["self_loss_rel"] for r in n20)
        result["self_max_loss_rel"] = max(r["self_loss_rel"] for r in rows)
    print("lockstep %s: %d steps, largest relative loss difference %.2e (first 20 steps: %.2e), gradient norm %.2e"
          % (a.dtype, len(rows), result["max_loss_rel"], result["max_loss_rel_20"], result["max_norm_rel"]))
    if a.final:
        print("  parameters after the last step: largest difference %.2e, relative %.2e"
              % (result["param_max_abs"], result["param_rel"]))
    if self_:
        print("  the twin from weights perturbed by %g: largest relative loss difference %.2e (first 20 steps: %.2e)"
              % (a.perturb, result["self_max_loss_rel"], result["self_max_loss_rel_20"]))
    if result["lr_differs"] or result["tokens_differ"]:
        print("  rates differ in %d steps, target tokens in %d" % (result["lr_differs"], result["tokens_differ"]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
            f.write("\n")
    return 0


# ---------------------------------------------------------------------------
# initcheck: the twin's initial weights against the C program's
# ---------------------------------------------------------------------------

def ks_statistic(a, b):
    """Two-sample Kolmogorov-Smirnov D: the largest gap between the
    empirical distribution functions of the sorted lists a and b."""
    i = j = 0
    d = 0.0
    while i < len(a) and j < len(b):
        x = min(a[i], b[j])
        while i < len(a) and a[i] <= x:
            i += 1
        while j < len(b) and b[j] <= x:
            j += 1
        d = max(d, abs(i / len(a) - j / len(b)))
    return d


def cmd_initcheck(torch, a):
    """Every parameter of a C checkpoint (trained so little that its weights
    are its initial ones) against the twin's init for the same config: equal
    when the twin's is a constant (0 or 1, to 1e-6), else drawn from the same
    distribution: two-sample Kolmogorov-Smirnov D below its 1e-6 critical
    value, 2.63 sqrt((n + m) / (n m)).  Exit status 1 when one is not."""
    tensors, meta = st_read(a.model)
    init = a.init or meta.get("init", "scaled")
    sv, tv = Vocab.parse(meta["src_vocab"]), Vocab.parse(meta["tgt_vocab"])
    cfg = dict(src_vocab=len(sv), tgt_vocab=len(tv), hidden=int(meta["hidden"]), heads=int(meta["heads"]),
               ffn=int(meta["ffn"]), layers=int(meta["layers"]), max_len=int(meta["max_len"]),
               dropout=float(meta["dropout"]), init=init)
    torch.manual_seed(a.seed)
    model = define_model(torch)(cfg)
    model.init_weights(init)
    bad = 0
    for name, p in model.named_parameters():
        ours = sorted(p.detach().reshape(-1).tolist())
        theirs = sorted(tensors[name][2])
        if ours[0] == ours[-1]:
            worst = max(abs(x - ours[0]) for x in theirs)
            ok, what = worst <= 1e-6, "constant %g, C differs by up to %.3g" % (ours[0], worst)
        else:
            n, m = len(ours), len(theirs)
            d, crit = ks_statistic(ours, theirs), 2.63 * math.sqrt((n + m) / (n * m))
            ok, what = d < crit, "KS D %.4f, critical %.4f (n %d)" % (d, crit, n)
        bad += not ok
        if not ok or not a.quiet:
            print("%-48s %s  %s" % (name, "ok " if ok else "BAD", what))
    print("initcheck %s: %d of %d parameters differ in distribution" % (init, bad, len(list(model.parameters()))))
    return 1 if bad else 0


# ---------------------------------------------------------------------------
# split: a train / held-out split by distinct source sentence
# ---------------------------------------------------------------------------

def cmd_split(a):
    """Lines verbatim; the k-th distinct source (preprocessed tokens, in order
    of first appearance, k from 0) and all its pairs go to the held-out file
    when k % every == every - 1, so no held-out source is seen in training
    and both files cover every sentence length.  Unusable lines are dropped."""
    with open(a.data, "rb") as f:
        data = f.read()
    lines = data.split(b"\n")
    if data.endswith(b"\n"):
        lines.pop()
    rank, out = {}, ([], [])
    for line in lines:
        line = line[:-1] if line.endswith(b"\r") else line
        if line_problem(line):
            continue
        src, rest = line.split(b"\t", 1)
        s, t = tokenize(preprocess(src)), tokenize(preprocess(rest.split(b"\t", 1)[0]))
        if not s or not t:
            continue
        k = rank.setdefault(tuple(s), len(rank))
        out[k % a.every == a.every - 1].append(line)
    for path, part in zip((a.train, a.test), out):
        with open(path, "wb") as f:
            f.write(b"".join(l + b"\n" for l in part))
    n_test = sum(1 for k in rank.values() if k % a.every == a.every - 1)
    print("%s: %d pairs, %d distinct sources -> %s: %d pairs, %s: %d pairs (%d sources)"
          % (a.data, len(out[0]) + len(out[1]), len(rank), a.train, len(out[0]), a.test, len(out[1]), n_test))
    return 0


# ---------------------------------------------------------------------------

def add_recipe_flags(p):
    """translate train's flags of the optimizer and the schedule, with its defaults."""
    p.add_argument("--epochs", type=int, default=50, help="the run's planned epochs (the schedule's length)")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--optimizer", choices=("sgd", "adam"), default="sgd")
    p.add_argument("--lr", type=float)
    p.add_argument("--momentum", type=float)
    p.add_argument("--nesterov", dest="nesterov", action="store_true", default=True)
    p.add_argument("--no-nesterov", dest="nesterov", action="store_false")
    p.add_argument("--schedule", choices=("constant", "linear", "cosine", "noam"), default="cosine")
    p.add_argument("--warmup", type=int, default=400)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--clip", type=float, default=1.0)


def main_parser():
    """The command line's parser (make_lockstep_fixture.py reads lockstep's flags with it)."""
    p = argparse.ArgumentParser(prog="translator.py", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train", help="train on a TSV file, as `translate train`")
    t.add_argument("--data", required=True)
    t.add_argument("--test")
    add_recipe_flags(t)
    t.add_argument("--hidden", type=int, default=64)
    t.add_argument("--heads", type=int, default=4)
    t.add_argument("--ffn", type=int, default=128)
    t.add_argument("--layers", type=int, default=2)
    t.add_argument("--dropout", type=float, default=0.1)
    t.add_argument("--max-len", type=int, default=10)
    t.add_argument("--min-freq", type=int, default=2)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--init", choices=("scaled", "d2l"), default="scaled",
                   help="initial weights: scaled (embeddings N(0, 1/C)) or d2l's (N(0, 1), see init_weights)")
    norm = t.add_mutually_exclusive_group()
    norm.add_argument("--pre-norm", dest="pre_norm", action="store_true", default=True,
                      help="pre-norm blocks and a final LayerNorm per stack (the default, as translate's)")
    norm.add_argument("--post-norm", dest="pre_norm", action="store_false", help="post-norm blocks")
    t.add_argument("--qk-norm", action="store_true", help="LayerNorm of each head's q and k before q.k")
    t.add_argument("--threads", type=int)
    t.add_argument("--json")
    t.add_argument("--out", help="also save the model in translate's checkpoint format")
    t.add_argument("--quiet", action="store_true")
    s = sub.add_parser("step", help="write the training-step parity fixture from a C checkpoint")
    s.add_argument("--model", required=True)
    s.add_argument("--data", required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--min-freq", type=int, default=2, help="when the checkpoint does not say")
    s.add_argument("--threads", type=int, default=1)
    k = sub.add_parser("lockstep", help="the steps of translate train --trace, from its --save-init weights")
    k.add_argument("--model", required=True, help="translate train --save-init's checkpoint")
    k.add_argument("--data", required=True)
    k.add_argument("--trace", required=True, help="translate train --trace's file")
    k.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    k.add_argument("--final", help="C's checkpoint after the last step: its parameters against the twin's")
    add_recipe_flags(k)
    k.add_argument("--perturb", type=float, help="also the twin from its weights times (1 + PERTURB z)")
    k.add_argument("--json")
    k.add_argument("--quiet", action="store_true")
    k.add_argument("--threads", type=int, default=1)
    c = sub.add_parser("initcheck", help="compare a C checkpoint's initial weights with the twin's init")
    c.add_argument("--model", required=True)
    c.add_argument("--init", choices=("scaled", "d2l"), help="default: the checkpoint's")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--quiet", action="store_true")
    c.add_argument("--threads", type=int, default=1)
    d = sub.add_parser("split", help="split a TSV file into train and held-out files by distinct source")
    d.add_argument("--data", required=True)
    d.add_argument("--train", required=True)
    d.add_argument("--test", required=True)
    d.add_argument("--every", type=int, default=10, help="every N-th distinct source is held out")
    return p


def main(argv):
    a = main_parser().parse_args(argv)
    if a.cmd == "split":
        return cmd_split(a)
    torch = import_torch(a.threads)
    if a.cmd == "initcheck":
        return cmd_initcheck(torch, a)
    if a.cmd == "lockstep":
        return cmd_lockstep(torch, a)
    return cmd_train(torch, a) if a.cmd == "train" else cmd_step(torch, a)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
