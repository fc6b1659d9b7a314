#!/usr/bin/python3
"""make_block_fixtures.py: PyTorch reference values for the block options,
the embedding layer and cross-entropy's reductions.

Run with Debian's PyTorch (apt-get install python3-torch):

    /usr/bin/python3 tests/reference/make_block_fixtures.py

It writes options.safetensors next to itself (tests/test_parity_options.c
reads it), with the conventions of make_fixtures.py (F64 everywhere, I64
for ids, "c.<input>", "c.w", "c.out", "grad.<name>", values on a 2^-16 grid):

    pre_gelu    nn.TransformerEncoderLayer(norm_first=True, activation="gelu"),
                key padding (5, 3)
    post_tanh   nn.TransformerEncoderLayer(norm_first=False,
                activation=gelu(approximate="tanh")), no mask
    causal      the decoder-only block: TransformerEncoderLayer(norm_first=True,
                activation="gelu") under a causal mask
    dec_pre     nn.TransformerDecoderLayer(norm_first=True), causal
                self-attention, cross-attention over a padded memory
    emb_tied    token + learned position embeddings, logits through the
                token table (weight tying): grad.emb_tied.tokens.weight sums
                both uses
    emb_sin     token embedding + sinusoidal positions
    ce_mean, ce_sum, ce_none
                F.cross_entropy(ignore_index=0, label_smoothing=0.1,
                reduction=...); for none, L = sum(out * w)

nn.MultiheadAttention packs W_q, W_k, W_v into in_proj_weight [3C, C]; the
fixture stores the three row blocks under attograd's names (w_q, w_k, w_v),
and the same for their gradients.
"""
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures as mf  # noqa: E402  (Fixture, rand, leaf, q, ...)

torch.set_default_dtype(torch.float64)
torch.set_num_threads(1)

B, T, C, H, F_ = 2, 5, 8, 2, 16


def attention_names(prefix, mha, C):
    """(name, tensor, grad) for an nn.MultiheadAttention under attograd's
    names: the packed projection split into w_q, w_k, w_v."""
    out = []
    for i, part in enumerate("qkv"):
        rows = slice(i * C, (i + 1) * C)
        out.append((prefix + ".w_%s.weight" % part, mha.in_proj_weight[rows], mha.in_proj_weight.grad[rows]))
        out.append((prefix + ".w_%s.bias" % part, mha.in_proj_bias[rows], mha.in_proj_bias.grad[rows]))
    out.append((prefix + ".w_o.weight", mha.out_proj.weight, mha.out_proj.weight.grad))
    out.append((prefix + ".w_o.bias", mha.out_proj.bias, mha.out_proj.bias.grad))
    return out


def linear_names(prefix, lin):
    return [(prefix + ".weight", lin.weight, lin.weight.grad), (prefix + ".bias", lin.bias, lin.bias.grad)]


def layer_names(prefix, layer, decoder):
    """Every parameter of a TransformerEncoderLayer / DecoderLayer as attograd
    names it (ag_encoder_block "<prefix>.attention", ag_decoder_block
    "<prefix>.self_attention" and "<prefix>.cross_attention")."""
    if decoder:
        names = attention_names(prefix + ".self_attention", layer.self_attn, C)
        names += attention_names(prefix + ".cross_attention", layer.multihead_attn, C)
        norms = ("norm1", "norm2", "norm3")
    else:
        names = attention_names(prefix + ".attention", layer.self_attn, C)
        norms = ("norm1", "norm2")
    names += linear_names(prefix + ".ffn.dense1", layer.linear1)
    names += linear_names(prefix + ".ffn.dense2", layer.linear2)
    for n in norms:
        names += linear_names(prefix + "." + n, getattr(layer, n))
    return names


def prepared(layer):
    """Dropout off, layer norms off their initial point, parameters on the
    2^-16 grid."""
    layer.train()  # dropout is 0: train mode keeps PyTorch off its fused fast path
    mf.randomize_norms(layer)
    mf.quantize_module(layer)
    return layer


def store_layer(fx, prefix, layer, inputs, out, decoder=False):
    L, w = mf.loss_of(out)
    L.backward()
    for name, t in inputs:
        fx.add(name, t)
    fx.add(prefix + ".w", w)
    fx.add(prefix + ".out", out)
    for name, p, _ in layer_names(prefix, layer, decoder):
        fx.add(name, p)
    for name, t in inputs:
        if t.requires_grad:
            fx.add("grad." + name, t.grad)
    for name, _, g in layer_names(prefix, layer, decoder):
        fx.add("grad." + name, g)


def causal_mask(n):
    """True where attention is not allowed (key after query)."""
    return torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)


def key_padding(valid, n):
    """True at the padded keys (PyTorch's key_padding_mask)."""
    return torch.arange(n)[None, :] >= valid[:, None]


def make_layers(fx):
    # pre-norm encoder block with GELU, keys padded to (5, 3)
    torch.manual_seed(41)
    layer = prepared(nn.TransformerEncoderLayer(C, H, F_, dropout=0.0, activation="gelu", batch_first=True,
                                                norm_first=True))
    x = mf.leaf(mf.rand(B, T, C))
    vl = torch.tensor([5, 3])
    out = layer(x, src_key_padding_mask=key_padding(vl, T))
    store_layer(fx, "pre_gelu", layer, [("pre_gelu.x", x), ("pre_gelu.valid_lens", vl)], out)

    # post-norm encoder block with GPT-2's tanh GELU
    torch.manual_seed(42)
    layer = prepared(nn.TransformerEncoderLayer(C, H, F_, dropout=0.0,
                                                activation=lambda v: F.gelu(v, approximate="tanh"),
                                                batch_first=True, norm_first=False))
    x = mf.leaf(mf.rand(B, T, C))
    store_layer(fx, "post_tanh", layer, [("post_tanh.x", x)], layer(x))

    # the decoder-only block: pre-norm, GELU, causal self-attention
    torch.manual_seed(43)
    layer = prepared(nn.TransformerEncoderLayer(C, H, F_, dropout=0.0, activation="gelu", batch_first=True,
                                                norm_first=True))
    x = mf.leaf(mf.rand(B, T, C))
    store_layer(fx, "causal", layer, [("causal.x", x)], layer(x, src_mask=causal_mask(T)))

    # pre-norm decoder block: causal self-attention, cross-attention over a
    # memory [2, 6, 8] whose keys are padded to (6, 2)
    torch.manual_seed(44)
    layer = prepared(nn.TransformerDecoderLayer(C, H, F_, dropout=0.0, batch_first=True, norm_first=True))
    x = mf.leaf(mf.rand(B, T, C))
    enc = mf.leaf(mf.rand(B, 6, C))
    vl = torch.tensor([6, 2])
    out = layer(x, enc, tgt_mask=causal_mask(T), memory_key_padding_mask=key_padding(vl, 6))
    store_layer(fx, "dec_pre", layer, [("dec_pre.x", x), ("dec_pre.enc", enc), ("dec_pre.valid_lens", vl)], out,
                decoder=True)


def sinusoid(n, c):
    """P[t, 2i] = sin(t / 10000^(2i/C)), P[t, 2i+1] = cos(...), as attograd."""
    p = torch.zeros(n, c)
    for t in range(n):
        for i in range(0, c, 2):
            angle = t / math.pow(10000.0, i / c)
            p[t, i] = math.sin(angle)
            if i + 1 < c:
                p[t, i + 1] = math.cos(angle)
    return p


def make_embeddings(fx):
    V, max_len = 7, 6
    torch.manual_seed(45)
    ids = torch.tensor([[1, 4, 4, 0, 6], [2, 2, 5, 3, 1]])
    tokens = mf.leaf(mf.rand(V, C))
    positions = mf.leaf(mf.rand(max_len, C))
    x = F.embedding(ids, tokens) + positions[:T]
    logits = x @ tokens.t()  # the output layer is the token table
    L, w = mf.loss_of(logits)
    L.backward()
    fx.add("emb_tied.ids", ids)
    fx.add("emb_tied.tokens.weight", tokens)
    fx.add("emb_tied.positions.weight", positions)
    fx.add("emb_tied.w", w)
    fx.add("emb_tied.x", x)
    fx.add("emb_tied.out", logits)
    fx.add("grad.emb_tied.tokens.weight", tokens.grad)
    fx.add("grad.emb_tied.positions.weight", positions.grad)

    tokens = mf.leaf(mf.rand(V, C))
    out = F.embedding(ids, tokens) + sinusoid(T, C)
    L, w = mf.loss_of(out)
    L.backward()
    fx.add("emb_sin.ids", ids)
    fx.add("emb_sin.tokens.weight", tokens)
    fx.add("emb_sin.w", w)
    fx.add("emb_sin.out", out)
    fx.add("grad.emb_sin.tokens.weight", tokens.grad)


def make_cross_entropy(fx):
    torch.manual_seed(46)
    targets = torch.tensor([[2, 0, 4], [1, 3, 0]])  # 0 is ignored (<pad>)
    for reduction in ("mean", "sum", "none"):
        name = "ce_" + reduction
        logits = mf.leaf(mf.rand(2, 3, 5, scale=2.0))
        out = F.cross_entropy(logits.reshape(-1, 5), targets.reshape(-1), ignore_index=0, label_smoothing=0.1,
                              reduction=reduction)
        if reduction == "none":
            out = out.reshape(2, 3)
            L, w = mf.loss_of(out)
            fx.add(name + ".w", w)
        else:
            L = out
            out = out.reshape(1)
        L.backward()
        fx.add(name + ".logits", logits)
        fx.add(name + ".targets", targets)
        fx.add(name + ".out", out)
        fx.add("grad." + name + ".logits", logits.grad)


if __name__ == "__main__":
    fx = mf.Fixture("block options (pre-norm, GELU, tanh GELU, causal, decoder pre-norm), embeddings with "
                    "weight tying and sinusoidal positions, cross-entropy reductions")
    fx.generator = "tests/reference/make_block_fixtures.py"
    make_layers(fx)
    make_embeddings(fx)
    make_cross_entropy(fx)
    fx.save("options.safetensors")
