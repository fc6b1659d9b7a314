#!/usr/bin/python3
"""make_sdpa_fixtures.py: PyTorch reference values for scaled dot-product
attention with grouped-query heads (tests/test_sdpa.c).

Run with Debian's PyTorch (apt-get install python3-torch):

    /usr/bin/python3 tests/reference/make_sdpa_fixtures.py

It writes sdpa.safetensors next to itself, with make_fixtures.py's
conventions (float64, inputs rounded to multiples of 2^-16, L = sum(out * w),
grad.<name>).  Debian's torch (1.13) has no F.scaled_dot_product_attention,
so the reference is its definition, in float64, with the key/value heads
repeated (PyTorch's enable_gqa):

    keep = mask != 0  and  s <= t + diag (causal: diag 0 top-left,
                                          S - T bottom-right)
    P    = softmax(where(keep, scale Q K^T, fill)),  a row with nothing
           above -inf: 0 (attograd's rule; PyTorch gives NaN there)
    out  = P V

Each case c stores c.q [B, H, T, D], c.k and c.v [B, Hkv, S, D or Dv],
c.mask (when it has one, [B, 1, T, S] of 0/1), c.w, c.out and the gradients
grad.c.q, grad.c.k, grad.c.v, and in c.meta the integers
(causal 0/1/2, fill is -inf 1 or -1e9 0) and c.scale.

sdpa_bias.safetensors holds the cases with an additive mask (PyTorch's
float attn_mask), c.bias, broadcast to [B, H, T, S] and added to the kept
keys' scaled scores:

    P    = softmax(where(keep, scale Q K^T + bias, fill))

(random, ALiBi-like and padding-like biases with -inf entries and rows
whose every score is -inf, of shapes [T, S], [B, 1, 1, S], [1, H, T, S]
and [B, H, T, S], on both sides of the 256-key seam), and grad.c.bias,
the bias's gradient summed over the axes it is broadcast along.
"""
import torch

from make_fixtures import Fixture, leaf, loss_of, rand

torch.set_default_dtype(torch.float64)
torch.set_num_threads(1)


def sdpa_ref(q, k, v, mask, causal, fill, scale, bias=None):
    H, Hkv, T, S = q.shape[1], k.shape[1], q.shape[2], k.shape[2]
    k2 = k.repeat_interleave(H // Hkv, dim=1)
    v2 = v.repeat_interleave(H // Hkv, dim=1)
    z = scale * (q @ k2.transpose(-1, -2))
    keep = torch.ones(T, S, dtype=torch.bool)
    if causal:
        diag = 0 if causal == 1 else S - T
        t = torch.arange(T).unsqueeze(1)
        s = torch.arange(S).unsqueeze(0)
        keep = s <= t + diag
    keep = keep.expand(z.shape)
    if mask is not None:
        keep = keep & (mask != 0)
    if bias is not None:
        z = z + bias
    z = torch.where(keep, z, torch.full_like(z, fill))
    dead = (z == float("-inf")).all(dim=-1, keepdim=True)  # sees no key: 0
    p = torch.softmax(torch.where(dead, torch.zeros_like(z), z), dim=-1)
    p = torch.where(dead, torch.zeros_like(p), p)
    return p @ v2


def case(fx, name, B, H, Hkv, T, S, D, Dv, causal=0, fill=float("-inf"), scale=None, dead_rows=(), seed=0,
         bias=None):
    torch.manual_seed(seed)
    q, k, v = leaf(rand(B, H, T, D)), leaf(rand(B, Hkv, S, D)), leaf(rand(B, Hkv, S, Dv))
    mask = None
    if dead_rows:
        mask = (torch.rand(B, 1, T, S) > 0.3).double()
        for b, t in dead_rows:
            mask[b, 0, t, :] = 0
    if bias is not None:  # make_bias's kind
        bias = leaf(make_bias(bias, B, H, T, S, seed))
    sc = scale if scale is not None else D ** -0.5
    out = sdpa_ref(q, k, v, mask, causal, fill, sc, bias)
    L, w = loss_of(out)
    L.backward()
    for n, t in (("q", q), ("k", k), ("v", v)):
        fx.add(name + "." + n, t)
    if mask is not None:
        fx.add(name + ".mask", mask)
    if bias is not None:
        fx.add(name + ".bias", bias)
    fx.add(name + ".meta", torch.tensor([causal, 1 if fill == float("-inf") else 0], dtype=torch.int64))
    fx.add(name + ".scale", torch.tensor([sc]))
    fx.add(name + ".w", w)
    fx.add(name + ".out", out)
    ins = (("q", q), ("k", k), ("v", v)) + ((("bias", bias),) if bias is not None else ())
    fx.add_grads([("%s.%s" % (name, n), t) for n, t in ins])


def make_bias(kind, B, H, T, S, seed):
    """An additive mask: "rand" [T, S] with -inf entries and a row all -inf;
    "pad" [B, 1, 1, S]: 0, or -inf past each sentence's length; "alibi"
    [1, H, T, S]: slope_h (s - t), ALiBi's; "full" [B, H, T, S] random
    with -inf entries and a fully -inf row per head of sentence 0."""
    g = torch.Generator().manual_seed(seed)
    if kind == "pad":
        b = torch.zeros(B, 1, 1, S)
        for i in range(B):
            b[i, 0, 0, max(1, S - 3 * (i + 1)):] = float("-inf")
        return b
    if kind == "alibi":
        slopes = torch.tensor([2.0 ** (-8.0 * (h + 1) / H) for h in range(H)])
        t = torch.arange(T).double().unsqueeze(1)
        s = torch.arange(S).double().unsqueeze(0)
        return slopes.view(1, H, 1, 1) * (s - t)
    shape = (T, S) if kind == "rand" else (B, H, T, S)
    b = (torch.randn(*shape, generator=g) * 2 * 65536).round() / 65536
    b[torch.rand(*shape, generator=g) < 0.15] = float("-inf")
    if kind == "rand":
        b[T // 2, :] = float("-inf")
    else:
        b[0, :, T - 1, :] = float("-inf")
    return b


def main_bias():
    fx = Fixture("scaled dot-product attention with an additive mask: out, grad of L = sum(out * w)")
    fx.generator = "tests/reference/make_sdpa_fixtures.py"
    # P kept: [T, S] random with a row all -inf; with a 0/1 mask and fill -1e9
    case(fx, "rand_ts", 2, 4, 2, 5, 7, 8, 6, seed=11, bias="rand")
    case(fx, "rand_ts_mask", 2, 4, 2, 6, 9, 4, 4, causal=1, fill=-1e9, dead_rows=((0, 1),), seed=12, bias="rand")
    case(fx, "pad", 3, 4, 1, 4, 8, 4, 3, causal=2, seed=13, bias="pad")
    case(fx, "alibi", 1, 4, 2, 8, 8, 4, 4, causal=1, seed=14, bias="alibi")
    case(fx, "full", 2, 2, 2, 5, 6, 4, 4, dead_rows=((1, 2),), seed=15, bias="full")
    # toy heads (S 16, D 8): the kernel for toy heads declines a bias
    case(fx, "toy", 1, 2, 2, 16, 16, 8, 8, causal=1, seed=16, bias="rand")
    # around the seam (256 keys): P kept below, the flash kernel above
    case(fx, "seam_255", 1, 4, 2, 255, 255, 4, 4, causal=2, seed=17, bias="rand")
    case(fx, "seam_1", 2, 4, 2, 1, 257, 4, 4, causal=2, seed=18, bias="pad")
    case(fx, "seam_alibi", 1, 4, 1, 20, 257, 4, 4, causal=2, seed=19, bias="alibi")
    case(fx, "seam_full", 2, 2, 1, 30, 300, 4, 3, causal=1, dead_rows=((0, 4),), seed=20, bias="full")
    case(fx, "seam_300", 1, 2, 2, 300, 300, 4, 4, causal=1, fill=-1e9, seed=21, bias="rand")
    fx.save("sdpa_bias.safetensors")


def main():
    fx = Fixture("scaled dot-product attention, grouped-query heads: out, grad of L = sum(out * w)")
    fx.generator = "tests/reference/make_sdpa_fixtures.py"
    # P kept (at most 256 keys): 12 query heads over 4, then over 1
    case(fx, "gqa4", 2, 12, 4, 5, 7, 8, 6, seed=1)
    case(fx, "mqa1", 1, 12, 1, 6, 9, 4, 4, causal=1, scale=0.3, seed=2)
    # bottom-right, more queries than keys: the first rows see nothing
    case(fx, "lower_right", 1, 12, 4, 6, 4, 4, 3, causal=2, seed=3)
    # fully masked rows, fill -1e9 (uniform) and -inf (zeros)
    case(fx, "dead_uniform", 2, 12, 4, 5, 6, 4, 4, causal=1, fill=-1e9, dead_rows=((0, 2), (1, 0)), seed=4)
    case(fx, "dead_zero", 2, 12, 1, 5, 6, 4, 4, dead_rows=((0, 2), (1, 4)), seed=5)
    # past the seam (256 keys): the flash kernel
    case(fx, "seam_mask", 1, 12, 4, 20, 257, 4, 4, causal=2, dead_rows=((0, 3), (0, 17)), seed=6)
    case(fx, "seam_top_left", 1, 12, 1, 70, 300, 4, 3, causal=1, seed=7)
    case(fx, "seam_lower_right", 1, 12, 4, 40, 300, 4, 4, causal=2, seed=8)
    fx.save("sdpa.safetensors")
    main_bias()


if __name__ == "__main__":
    main()
