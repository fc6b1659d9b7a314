#!/usr/bin/python3
"""make_fixtures.py: PyTorch reference values for the parity tests.

Run with Debian's PyTorch (apt-get install python3-torch):

    /usr/bin/python3 tests/reference/make_fixtures.py

It writes, next to itself,

    ops.safetensors        softmax, log_softmax, layer_norm, batched matmul,
                           cross_entropy (ignore_index, label smoothing),
                           embedding, index_add     -> tests/test_parity_ops.c
    attention.safetensors  the tutorial's multi-head self-attention (with and
                           without a mask), causal self-attention, key padding
                           from valid lengths ([B] and [B, T]), cross-attention
                                                    -> tests/test_parity_attention.c
    blocks.safetensors     one post-norm encoder block, one decoder block
    d2l.safetensors        d2l's MultiHeadAttention example (100 hiddens, 5 heads)

Conventions, the same in every file:
  * everything is float64 ("F64"); integer data (targets, ids, valid lengths)
    is "I64";
  * a case named c stores its inputs as "c.<input>", the weight of its loss as
    "c.w" and its results as "c.out" (and "c.attn" ...);
  * the loss is L = sum(out * c.w) (a cross-entropy is already a scalar:
    L = out), and the gradient of L w.r.t. a tensor named n is "grad.<n>";
  * module parameters are stored under the names attograd gives them (the C
    test builds the same module with the same prefix and loads each one by
    name): "mhsa.w_q.weight" is [out, in], as nn.Linear's;
  * inputs, weights and parameters are rounded to multiples of 2^-16, so the
    float build of attograd reads them exactly; only the results carry float64
    rounding.

The files are written by hand (8-byte little-endian header length, a JSON
header padded with spaces to a multiple of 8, the raw little-endian data), so
no safetensors package is needed.  Every case reseeds torch, and torch runs
on one thread: rerunning the script rewrites the same bytes.
"""
import json
import math
import os
import struct

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)
torch.set_num_threads(1)

HERE = os.path.dirname(os.path.abspath(__file__))
NEG_INF = float("-inf")


# ---------------------------------------------------------------------------
# safetensors, by hand
# ---------------------------------------------------------------------------

class Fixture:
    """Named tensors in insertion order, saved as one safetensors file."""

    def __init__(self, description):
        self.description = description
        self.tensors = {}  # name -> (dtype, shape, bytes)

    def add(self, name, t):
        assert name not in self.tensors, name
        t = torch.as_tensor(t).detach().contiguous()
        shape = list(t.shape)
        values = t.reshape(-1).tolist()
        if t.dtype.is_floating_point:
            data = struct.pack("<%dd" % len(values), *values)
            dtype = "F64"
        else:
            data = struct.pack("<%dq" % len(values), *[int(v) for v in values])
            dtype = "I64"
        self.tensors[name] = (dtype, shape, data)

    def add_grads(self, tensors):
        """grad.<name> for each (name, leaf tensor) pair."""
        for name, t in tensors:
            assert t.grad is not None, name
            self.add("grad." + name, t.grad)

    def save(self, filename):
        header, offset = {}, 0
        for name, (dtype, shape, data) in self.tensors.items():
            header[name] = {"dtype": dtype, "shape": shape,
                            "data_offsets": [offset, offset + len(data)]}
            offset += len(data)
        header["__metadata__"] = {
            "generator": getattr(self, "generator", "tests/reference/make_fixtures.py"),
            "torch": torch.__version__,
            "description": self.description,
        }
        text = json.dumps(header, separators=(",", ":")).encode("utf-8")
        text += b" " * (-(8 + len(text)) % 8)
        path = os.path.join(HERE, filename)
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(text)))
            f.write(text)
            for _, _, data in self.tensors.values():
                f.write(data)
        print("%-22s %3d tensors, %7d bytes" % (filename, len(self.tensors), os.path.getsize(path)))


def q(t):
    """Round to a multiple of 2^-16: exact in float32 for |t| < 256."""
    return torch.round(t * 65536.0) / 65536.0


def rand(*shape, scale=1.0):
    return q(torch.randn(*shape) * scale)


def leaf(t):
    return t.clone().requires_grad_(True)


def quantize_module(m):
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(q(p))


def randomize_norms(m):
    """LayerNorm gain near 1 and bias near 0, but not exactly (so their
    gradients and their effect are both tested)."""
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, nn.LayerNorm):
                mod.weight.copy_(1 + 0.2 * torch.randn(mod.weight.shape))
                mod.bias.copy_(0.1 * torch.randn(mod.bias.shape))


def add_module(fx, prefix, m, rename=None):
    """Store m's parameters as prefix.<name> (renamed through `rename`)."""
    named = []
    for name, p in m.named_parameters():
        for old, new in (rename or {}).items():
            name = name.replace(old, new)
        full = prefix + "." + name
        fx.add(full, p)
        named.append((full, p))
    return named


def loss_of(out):
    """L = sum(out * w) with a fixed random w of out's shape; returns (L, w)."""
    w = rand(*out.shape)
    return (out * w).sum(), w


# ---------------------------------------------------------------------------
# 1. core ops
# ---------------------------------------------------------------------------

def make_ops():
    fx = Fixture("core ops: inputs, outputs and gradients of L = sum(out * w)")

    # softmax and log_softmax over the last axis of [2, 3, 5]; one row has
    # logits far apart, where an unstable softmax would overflow in float.
    for name, fn in (("softmax", lambda x: F.softmax(x, dim=-1)),
                     ("log_softmax", lambda x: F.log_softmax(x, dim=-1))):
        torch.manual_seed(1 if name == "softmax" else 2)
        x = rand(2, 3, 5, scale=2.0)
        x[1, 2] = torch.tensor([40.0, -40.0, 39.5, 0.0, 10.0])
        x = leaf(x)
        y = fn(x)
        L, w = loss_of(y)
        L.backward()
        fx.add(name + ".x", x)
        fx.add(name + ".w", w)
        fx.add(name + ".out", y)
        fx.add_grads([(name + ".x", x)])

    # layer_norm over C = 8, with a gain and a bias, eps 1e-5
    torch.manual_seed(3)
    x = leaf(rand(2, 3, 8, scale=1.5) + 0.5)
    gain = leaf(q(1 + 0.3 * torch.randn(8)))
    bias = leaf(rand(8, scale=0.2))
    y = F.layer_norm(x, (8,), gain, bias, eps=1e-5)
    L, w = loss_of(y)
    L.backward()
    for n, t in (("x", x), ("weight", gain), ("bias", bias)):
        fx.add("layer_norm." + n, t)
    fx.add("layer_norm.w", w)
    fx.add("layer_norm.out", y)
    fx.add_grads([("layer_norm.x", x), ("layer_norm.weight", gain), ("layer_norm.bias", bias)])

    # batched matmul with a broadcast batch: [2, 1, 3, 4] @ [3, 4, 5] -> [2, 3, 3, 5]
    torch.manual_seed(4)
    a = leaf(rand(2, 1, 3, 4))
    b = leaf(rand(3, 4, 5))
    y = torch.matmul(a, b)
    L, w = loss_of(y)
    L.backward()
    fx.add("matmul.a", a)
    fx.add("matmul.b", b)
    fx.add("matmul.w", w)
    fx.add("matmul.out", y)
    fx.add_grads([("matmul.a", a), ("matmul.b", b)])

    # cross_entropy over logits [2, 3, 5], targets [2, 3], 0 is the pad id and
    # is ignored; mean over the rows that are not ignored.  Then the same with
    # label smoothing 0.1 (the translator's loss).
    for name, ls, seed in (("cross_entropy", 0.0, 5), ("cross_entropy_ls", 0.1, 6)):
        torch.manual_seed(seed)
        logits = leaf(rand(2, 3, 5, scale=2.0))
        targets = torch.tensor([[3, 0, 1], [4, 2, 0]], dtype=torch.int64)
        ignore = 0
        loss = F.cross_entropy(logits.reshape(-1, 5), targets.reshape(-1),
                               ignore_index=ignore, label_smoothing=ls, reduction="mean")
        # the same loss by its definition, as a check on torch's semantics
        logp = F.log_softmax(logits.detach().reshape(-1, 5), dim=-1)
        keep = targets.reshape(-1) != ignore
        nll = -logp[torch.arange(6), targets.reshape(-1)]
        smooth = -logp.mean(dim=-1)
        want = (((1 - ls) * nll + ls * smooth)[keep]).sum() / keep.sum()
        assert abs(loss.item() - want.item()) < 1e-14, (loss.item(), want.item())
        loss.backward()
        fx.add(name + ".logits", logits)
        fx.add(name + ".targets", targets)
        fx.add(name + ".ignore_index", torch.tensor([ignore], dtype=torch.int64))
        fx.add(name + ".label_smoothing", torch.tensor([ls]))
        fx.add(name + ".out", loss.reshape(1))
        fx.add_grads([(name + ".logits", logits)])

    # embedding: weight [6, 4], ids [2, 3] with a repeated id (1, three times)
    torch.manual_seed(7)
    weight = leaf(rand(6, 4))
    ids = torch.tensor([[1, 3, 1], [5, 1, 0]], dtype=torch.int64)
    y = F.embedding(ids, weight)
    L, w = loss_of(y)
    L.backward()
    fx.add("embedding.weight", weight)
    fx.add("embedding.ids", ids)
    fx.add("embedding.w", w)
    fx.add("embedding.out", y)
    fx.add_grads([("embedding.weight", weight)])

    # index_add: x [5, 3] into 7 rows, one index named twice, two rows unnamed
    torch.manual_seed(8)
    x = leaf(rand(5, 3))
    idx = torch.tensor([6, 0, 2, 6, 3], dtype=torch.int64)
    y = torch.zeros(7, 3, dtype=torch.float64).index_add(0, idx, x)
    L, w = loss_of(y)
    L.backward()
    fx.add("index_add.x", x)
    fx.add("index_add.idx", idx)
    fx.add("index_add.w", w)
    fx.add("index_add.out", y)
    fx.add_grads([("index_add.x", x)])

    fx.save("ops.safetensors")


# ---------------------------------------------------------------------------
# 2. attention modules
# ---------------------------------------------------------------------------

class TutorialMHSA(nn.Module):
    """The PyTorch tutorial's multi-head self-attention, followed by a
    residual and a LayerNorm: out = LayerNorm(x + W_o(attention(x)))."""

    def __init__(self, d_model, num_heads):
        super().__init__()
        assert d_model % num_heads == 0
        self.d_model, self.num_heads = d_model, num_heads
        self.d_k = d_model // num_heads
        self.w_q = nn.Linear(d_model, d_model)
        self.w_k = nn.Linear(d_model, d_model)
        self.w_v = nn.Linear(d_model, d_model)
        self.w_o = nn.Linear(d_model, d_model)
        self.norm = nn.LayerNorm(d_model)  # eps 1e-5

    def scaled_dot_product_attention(self, Q, K, V, mask=None):
        attn_scores = torch.matmul(Q, K.transpose(-2, -1)) / math.sqrt(self.d_k)
        if mask is not None:
            attn_scores = attn_scores.masked_fill(mask == 0, -1e9)
        attn_probs = torch.softmax(attn_scores, dim=-1)
        return torch.matmul(attn_probs, V), attn_probs

    def split_heads(self, x):
        batch_size, seq_length, d_model = x.size()
        return x.view(batch_size, seq_length, self.num_heads, self.d_k).transpose(1, 2)

    def combine_heads(self, x):
        batch_size, _, seq_length, d_k = x.size()
        return x.transpose(1, 2).contiguous().view(batch_size, seq_length, self.d_model)

    def forward(self, x, mask=None):
        Q = self.split_heads(self.w_q(x))
        K = self.split_heads(self.w_k(x))
        V = self.split_heads(self.w_v(x))
        attn_output, attn_probs = self.scaled_dot_product_attention(Q, K, V, mask)
        output = self.w_o(self.combine_heads(attn_output))
        return self.norm(x + output), attn_probs


class MHA(nn.Module):
    """Multi-head attention as attograd's ag_mha_layer_forward: queries from x_q,
    keys and values from x_kv; masked scores get `fill`."""

    def __init__(self, C, H, bias=True):
        super().__init__()
        self.C, self.H = C, H
        self.w_q = nn.Linear(C, C, bias=bias)
        self.w_k = nn.Linear(C, C, bias=bias)
        self.w_v = nn.Linear(C, C, bias=bias)
        self.w_o = nn.Linear(C, C, bias=bias)

    def forward(self, x_q, x_kv, mask=None, fill=NEG_INF):
        B, T, C = x_q.shape
        S, H, D = x_kv.shape[1], self.H, C // self.H
        q = self.w_q(x_q).reshape(B, T, H, D).permute(0, 2, 1, 3)
        k = self.w_k(x_kv).reshape(B, S, H, D).permute(0, 2, 1, 3)
        v = self.w_v(x_kv).reshape(B, S, H, D).permute(0, 2, 1, 3)
        scores = q @ k.transpose(-1, -2) / math.sqrt(D)
        if mask is not None:
            scores = scores.masked_fill(mask == 0, fill)
        p = torch.softmax(scores, dim=-1)
        o = (p @ v).permute(0, 2, 1, 3).reshape(B, T, C)
        return self.w_o(o), p


class FFN(nn.Module):
    def __init__(self, C, F_):
        super().__init__()
        self.dense1 = nn.Linear(C, F_)
        self.dense2 = nn.Linear(F_, C)

    def forward(self, x):
        return self.dense2(torch.relu(self.dense1(x)))


class EncoderBlock(nn.Module):
    """Post-norm: x = norm1(x + attention(x)); x = norm2(x + ffn(x)).
    Dropout 0 (eval)."""

    def __init__(self, C, H, F_):
        super().__init__()
        self.attention = MHA(C, H)
        self.norm1 = nn.LayerNorm(C)
        self.ffn = FFN(C, F_)
        self.norm2 = nn.LayerNorm(C)

    def forward(self, x, src_mask):
        a, w = self.attention(x, x, src_mask, NEG_INF)
        x = self.norm1(x + a)
        return self.norm2(x + self.ffn(x)), w


class DecoderBlock(nn.Module):
    """x = norm1(x + self_attention(x, causal));
    x = norm2(x + cross_attention(x, enc, src_mask)); x = norm3(x + ffn(x))."""

    def __init__(self, C, H, F_):
        super().__init__()
        self.self_attention = MHA(C, H)
        self.norm1 = nn.LayerNorm(C)
        self.cross_attention = MHA(C, H)
        self.norm2 = nn.LayerNorm(C)
        self.ffn = FFN(C, F_)
        self.norm3 = nn.LayerNorm(C)

    def forward(self, x, enc, self_mask, src_mask):
        a, self_w = self.self_attention(x, x, self_mask, NEG_INF)
        x = self.norm1(x + a)
        c, cross_w = self.cross_attention(x, enc, src_mask, NEG_INF)
        x = self.norm2(x + c)
        return self.norm3(x + self.ffn(x)), self_w, cross_w


# --- d2l (Dive into Deep Learning, chapter 11), PyTorch version -----------

def sequence_mask(X, valid_len, value=0):
    """Mask irrelevant entries in sequences."""
    maxlen = X.size(1)
    mask = torch.arange((maxlen), dtype=torch.float32,
                        device=X.device)[None, :] < valid_len[:, None]
    X[~mask] = value
    return X


def masked_softmax(X, valid_lens):
    """Perform softmax operation by masking elements on the last axis."""
    # X: 3D tensor, valid_lens: 1D or 2D tensor
    if valid_lens is None:
        return nn.functional.softmax(X, dim=-1)
    else:
        shape = X.shape
        if valid_lens.dim() == 1:
            valid_lens = torch.repeat_interleave(valid_lens, shape[1])
        else:
            valid_lens = valid_lens.reshape(-1)
        # On the last axis, replace masked elements with a very large negative
        # value, whose exponentiation outputs 0
        X = sequence_mask(X.reshape(-1, shape[-1]), valid_lens, value=-1e6)
        return nn.functional.softmax(X.reshape(shape), dim=-1)


class DotProductAttention(nn.Module):
    """Scaled dot product attention."""

    def __init__(self, dropout):
        super().__init__()
        self.dropout = nn.Dropout(dropout)

    # Shape of queries: (batch_size, no. of queries, d)
    # Shape of keys: (batch_size, no. of key-value pairs, d)
    # Shape of values: (batch_size, no. of key-value pairs, value dimension)
    # Shape of valid_lens: (batch_size,) or (batch_size, no. of queries)
    def forward(self, queries, keys, values, valid_lens=None):
        d = queries.shape[-1]
        # Swap the last two dimensions of keys with keys.transpose(1, 2)
        scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
        self.attention_weights = masked_softmax(scores, valid_lens)
        return torch.bmm(self.dropout(self.attention_weights), values)


class MultiHeadAttention(nn.Module):
    """Multi-head attention (d2l; nn.Linear with the in-width given instead of
    nn.LazyLinear, which changes nothing else)."""

    def __init__(self, num_hiddens, num_heads, dropout, bias=False, **kwargs):
        super().__init__()
        self.num_heads = num_heads
        self.attention = DotProductAttention(dropout)
        self.W_q = nn.Linear(num_hiddens, num_hiddens, bias=bias)
        self.W_k = nn.Linear(num_hiddens, num_hiddens, bias=bias)
        self.W_v = nn.Linear(num_hiddens, num_hiddens, bias=bias)
        self.W_o = nn.Linear(num_hiddens, num_hiddens, bias=bias)

    def forward(self, queries, keys, values, valid_lens):
        # Shape of queries, keys, or values:
        # (batch_size, no. of queries or key-value pairs, num_hiddens)
        # Shape of valid_lens: (batch_size,) or (batch_size, no. of queries)
        # After transposing, shape of output queries, keys, or values:
        # (batch_size * num_heads, no. of queries or key-value pairs,
        # num_hiddens / num_heads)
        queries = self.transpose_qkv(self.W_q(queries))
        keys = self.transpose_qkv(self.W_k(keys))
        values = self.transpose_qkv(self.W_v(values))

        if valid_lens is not None:
            # On axis 0, copy the first item (scalar or vector) for num_heads
            # times, then copy the next item, and so on
            valid_lens = torch.repeat_interleave(
                valid_lens, repeats=self.num_heads, dim=0)

        # Shape of output: (batch_size * num_heads, no. of queries,
        # num_hiddens / num_heads)
        output = self.attention(queries, keys, values, valid_lens)
        # Shape of output_concat: (batch_size, no. of queries, num_hiddens)
        output_concat = self.transpose_output(output)
        return self.W_o(output_concat)

    def transpose_qkv(self, X):
        """Transposition for parallel computation of multiple attention heads."""
        # Shape of input X: (batch_size, no. of queries or key-value pairs,
        # num_hiddens). Shape of output X: (batch_size, no. of queries or
        # key-value pairs, num_heads, num_hiddens / num_heads)
        X = X.reshape(X.shape[0], X.shape[1], self.num_heads, -1)
        # Shape of output X: (batch_size, num_heads, no. of queries or key-value
        # pairs, num_hiddens / num_heads)
        X = X.permute(0, 2, 1, 3)
        # Shape of output: (batch_size * num_heads, no. of queries or key-value
        # pairs, num_hiddens / num_heads)
        return X.reshape(-1, X.shape[2], X.shape[3])

    def transpose_output(self, X):
        """Reverse the operation of transpose_qkv."""
        X = X.reshape(-1, self.num_heads, X.shape[1], X.shape[2])
        X = X.permute(0, 2, 1, 3)
        return X.reshape(X.shape[0], X.shape[1], -1)


D2L_NAMES = {"W_q": "w_q", "W_k": "w_k", "W_v": "w_v", "W_o": "w_o"}


def padding_mask(valid_lens, S):
    """[B] -> [B, 1, 1, S]; [B, T] -> [B, 1, T, S]: 1 where s < valid length."""
    keep = (torch.arange(S)[None, :] < valid_lens.reshape(-1)[:, None]).to(torch.float64)
    if valid_lens.dim() == 1:
        return keep.reshape(valid_lens.shape[0], 1, 1, S)
    return keep.reshape(valid_lens.shape[0], 1, valid_lens.shape[1], S)


def make_attention():
    fx = Fixture("attention: tutorial MHSA (+/- mask), causal, key padding, cross-attention")

    # (a) the tutorial's MHSA, d_model 64, 8 heads, x [2, 4, 64]; without a
    # mask ("mhsa") and with a [2, 1, 4, 4] mask of 0s and 1s ("mhsa_masked";
    # the diagonal is kept, so no row is fully masked).
    for prefix, seed, masked in (("mhsa", 11, False), ("mhsa_masked", 12, True)):
        torch.manual_seed(seed)
        m = TutorialMHSA(64, 8)
        randomize_norms(m)
        quantize_module(m)
        x = leaf(rand(2, 4, 64))
        mask = None
        if masked:
            mask = (torch.rand(2, 1, 4, 4) < 0.6).to(torch.float64)
            mask[:, :, torch.arange(4), torch.arange(4)] = 1
            assert (mask == 0).any()
        out, attn = m(x, mask)
        L, w = loss_of(out)
        L.backward()
        params = add_module(fx, prefix, m)
        fx.add(prefix + ".x", x)
        if masked:
            fx.add(prefix + ".mask", mask)
        fx.add(prefix + ".w", w)
        fx.add(prefix + ".out", out)
        fx.add(prefix + ".attn", attn)
        fx.add_grads([(prefix + ".x", x)] + params)

    # (b) causal self-attention: C 16, H 4, x [2, 5, 16], mask lower-triangular,
    # masked scores -inf
    torch.manual_seed(13)
    m = MHA(16, 4)
    quantize_module(m)
    x = leaf(rand(2, 5, 16))
    out, attn = m(x, x, torch.tril(torch.ones(5, 5)), NEG_INF)
    L, w = loss_of(out)
    L.backward()
    params = add_module(fx, "causal", m)
    fx.add("causal.x", x)
    fx.add("causal.w", w)
    fx.add("causal.out", out)
    fx.add("causal.attn", attn)
    fx.add_grads([("causal.x", x)] + params)

    # (c) key padding from valid lengths, d2l-style (masked_softmax, -1e6):
    # "pad" with valid_lens [B] = [4, 1, 2] (a row sees one key only), "pad2d"
    # with valid_lens [B, T] per query.  C 12, H 3, x [3, 4, 12], with biases.
    for prefix, seed, vl in (
            ("pad", 14, torch.tensor([4, 1, 2], dtype=torch.int64)),
            ("pad2d", 15, torch.tensor([[1, 2, 3, 4], [1, 1, 2, 2], [4, 3, 1, 2]],
                                       dtype=torch.int64))):
        torch.manual_seed(seed)
        m = MultiHeadAttention(12, 3, 0.0, bias=True)
        m.eval()
        quantize_module(m)
        x = leaf(rand(3, 4, 12))
        out = m(x, x, x, vl)
        attn = m.attention.attention_weights.reshape(3, 3, 4, 4)
        # the same through MHA with an explicit 0/1 mask, as attograd builds it
        ref = MHA(12, 3)
        ref.load_state_dict({D2L_NAMES[k.split(".")[0]] + "." + k.split(".")[1]: v
                             for k, v in m.state_dict().items()})
        out2, attn2 = ref(x, x, padding_mask(vl, 4), -1e6)
        assert torch.allclose(out, out2, rtol=1e-13, atol=1e-14)
        assert torch.allclose(attn, attn2, rtol=1e-13, atol=1e-14)
        L, w = loss_of(out)
        L.backward()
        params = add_module(fx, prefix, m, D2L_NAMES)
        fx.add(prefix + ".x", x)
        fx.add(prefix + ".valid_lens", vl)
        fx.add(prefix + ".w", w)
        fx.add(prefix + ".out", out)
        fx.add(prefix + ".attn", attn)
        fx.add_grads([(prefix + ".x", x)] + params)

    # (d) cross-attention: queries [2, 3, 16], keys/values [2, 5, 16], H 4,
    # keys padded (valid lengths [5, 2]), masked scores -inf
    torch.manual_seed(16)
    m = MHA(16, 4)
    quantize_module(m)
    x_q = leaf(rand(2, 3, 16))
    x_kv = leaf(rand(2, 5, 16))
    vl = torch.tensor([5, 2], dtype=torch.int64)
    out, attn = m(x_q, x_kv, padding_mask(vl, 5), NEG_INF)
    L, w = loss_of(out)
    L.backward()
    params = add_module(fx, "cross", m)
    fx.add("cross.x_q", x_q)
    fx.add("cross.x_kv", x_kv)
    fx.add("cross.valid_lens", vl)
    fx.add("cross.w", w)
    fx.add("cross.out", out)
    fx.add("cross.attn", attn)
    fx.add_grads([("cross.x_q", x_q), ("cross.x_kv", x_kv)] + params)

    fx.save("attention.safetensors")


def make_blocks():
    fx = Fixture("one post-norm encoder block and one decoder block (dropout 0)")
    B, T, S, C, H, F_ = 2, 4, 5, 8, 2, 16

    # (e) encoder block "enc": x [2, 5, 8], source valid lengths [5, 3]
    torch.manual_seed(21)
    blk = EncoderBlock(C, H, F_)
    randomize_norms(blk)
    quantize_module(blk)
    x = leaf(rand(B, S, C))
    vl = torch.tensor([5, 3], dtype=torch.int64)
    out, attn = blk(x, padding_mask(vl, S))
    L, w = loss_of(out)
    L.backward()
    params = add_module(fx, "enc", blk)
    fx.add("enc.x", x)
    fx.add("enc.valid_lens", vl)
    fx.add("enc.w", w)
    fx.add("enc.out", out)
    fx.add("enc.attn", attn)
    fx.add_grads([("enc.x", x)] + params)

    # (f) decoder block "dec": x [2, 4, 8], encoder output [2, 5, 8] (both
    # differentiated), causal self-attention, source valid lengths [5, 3]
    torch.manual_seed(22)
    blk = DecoderBlock(C, H, F_)
    randomize_norms(blk)
    quantize_module(blk)
    x = leaf(rand(B, T, C))
    enc = leaf(rand(B, S, C))
    vl = torch.tensor([5, 3], dtype=torch.int64)
    out, self_w, cross_w = blk(x, enc, torch.tril(torch.ones(T, T)), padding_mask(vl, S))
    L, w = loss_of(out)
    L.backward()
    params = add_module(fx, "dec", blk)
    fx.add("dec.x", x)
    fx.add("dec.enc", enc)
    fx.add("dec.valid_lens", vl)
    fx.add("dec.w", w)
    fx.add("dec.out", out)
    fx.add("dec.self_attn", self_w)
    fx.add("dec.cross_attn", cross_w)
    fx.add_grads([("dec.x", x), ("dec.enc", enc)] + params)

    fx.save("blocks.safetensors")


# ---------------------------------------------------------------------------
# 3. d2l's example
# ---------------------------------------------------------------------------

def make_d2l():
    fx = Fixture("d2l MultiHeadAttention(100, 5, dropout 0.5, bias=False), eval")
    torch.manual_seed(31)
    num_hiddens, num_heads = 100, 5
    attention = MultiHeadAttention(num_hiddens, num_heads, 0.5)
    attention.eval()
    quantize_module(attention)
    params = add_module(fx, "d2l", attention, D2L_NAMES)

    # the book's example: all-ones queries, keys and values
    batch_size, num_queries, num_kvpairs = 2, 4, 6
    valid_lens = torch.tensor([3, 2])
    X = torch.ones((batch_size, num_queries, num_hiddens))
    Y = torch.ones((batch_size, num_kvpairs, num_hiddens))
    with torch.no_grad():
        out = attention(X, Y, Y, valid_lens)
    assert out.shape == (batch_size, num_queries, num_hiddens)
    fx.add("d2l.valid_lens", valid_lens)
    fx.add("d2l.ones.x_q", X)
    fx.add("d2l.ones.x_kv", Y)
    fx.add("d2l.ones.out", out)

    # the same module on random queries and keys (= values), where the mask
    # matters, with gradients
    x_q = leaf(rand(batch_size, num_queries, num_hiddens))
    x_kv = leaf(rand(batch_size, num_kvpairs, num_hiddens))
    out = attention(x_q, x_kv, x_kv, valid_lens)
    attn = attention.attention.attention_weights.reshape(batch_size, num_heads, num_queries,
                                                         num_kvpairs)
    L, w = loss_of(out)
    L.backward()
    fx.add("d2l.rand.x_q", x_q)
    fx.add("d2l.rand.x_kv", x_kv)
    fx.add("d2l.rand.w", w)
    fx.add("d2l.rand.out", out)
    fx.add("d2l.rand.attn", attn)
    fx.add_grads([("d2l.rand.x_q", x_q), ("d2l.rand.x_kv", x_kv)] + params)

    fx.save("d2l.safetensors")


if __name__ == "__main__":
    make_ops()
    make_attention()
    make_blocks()
    make_d2l()
