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
"""
import torch

from make_fixtures import Fixture, leaf, loss_of, rand

torch.set_default_dtype(torch.float64)
torch.set_num_threads(1)


def sdpa_ref(q, k, v, mask, causal, fill, scale):
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
    z = torch.where(keep, z, torch.full_like(z, fill))
    dead = (z == float("-inf")).all(dim=-1, keepdim=True)  # sees no key: 0
    p = torch.softmax(torch.where(dead, torch.zeros_like(z), z), dim=-1)
    p = torch.where(dead, torch.zeros_like(p), p)
    return p @ v2


def case(fx, name, B, H, Hkv, T, S, D, Dv, causal=0, fill=float("-inf"), scale=None, dead_rows=(), seed=0):
    torch.manual_seed(seed)
    q, k, v = leaf(rand(B, H, T, D)), leaf(rand(B, Hkv, S, D)), leaf(rand(B, Hkv, S, Dv))
    mask = None
    if dead_rows:
        mask = (torch.rand(B, 1, T, S) > 0.3).double()
        for b, t in dead_rows:
            mask[b, 0, t, :] = 0
    sc = scale if scale is not None else D ** -0.5
    out = sdpa_ref(q, k, v, mask, causal, fill, sc)
    L, w = loss_of(out)
    L.backward()
    for n, t in (("q", q), ("k", k), ("v", v)):
        fx.add(name + "." + n, t)
    if mask is not None:
        fx.add(name + ".mask", mask)
    fx.add(name + ".meta", torch.tensor([causal, 1 if fill == float("-inf") else 0], dtype=torch.int64))
    fx.add(name + ".scale", torch.tensor([sc]))
    fx.add(name + ".w", w)
    fx.add(name + ".out", out)
    fx.add_grads([("%s.%s" % (name, n), t) for n, t in (("q", q), ("k", k), ("v", v))])


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


if __name__ == "__main__":
    main()
