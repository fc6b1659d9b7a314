#!/usr/bin/python3
"""make_user_ops.py: PyTorch reference values for the ops a model of one's own
reaches for: expand, repeat, argmax, topk, where, clamp, a learned position
table added to [B, T, C], and a class token put in front of a sequence.

Run with Debian's PyTorch (apt-get install python3-torch):

    /usr/bin/python3 tests/reference/make_user_ops.py

It writes user_ops.safetensors next to itself, read by tests/test_user_ops.c
(suite user_ops_parity), with make_fixtures.py's conventions: float64
tensors ("F64"), integer results ("I64": argmax's and topk's indices), a case
c's inputs as "c.<input>", the weight of its loss as "c.w", its result as
"c.out", and the gradient of L = sum(out * c.w) w.r.t. input n as "grad.<n>".
Inputs are multiples of 2^-16 (exact in float32).  Each case reseeds torch:
rerunning the script rewrites the same bytes.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures as mf  # noqa: E402  (Fixture, rand, leaf, q, loss_of)

torch.set_default_dtype(torch.float64)
torch.set_num_threads(1)


def differentiable(fx, name, inputs, fn):
    """out = fn(*inputs); store inputs, w, out and the inputs' gradients."""
    leaves = [mf.leaf(t) for _, t in inputs]
    out = fn(*leaves)
    L, w = mf.loss_of(out)
    L.backward()
    for (n, _), t in zip(inputs, leaves):
        fx.add(name + "." + n, t)
    fx.add(name + ".w", w)
    fx.add(name + ".out", out)
    fx.add_grads([(name + "." + n, t) for (n, _), t in zip(inputs, leaves)])


def make_shapes(fx):
    torch.manual_seed(1)
    # x.expand: size-1 axes stretched, -1 kept, and a new leading axis
    differentiable(fx, "expand", [("x", mf.rand(1, 3, 1))], lambda x: x.expand(2, 2, -1, 4))
    torch.manual_seed(2)
    differentiable(fx, "repeat", [("x", mf.rand(2, 3))], lambda x: x.repeat(2, 1, 2))
    torch.manual_seed(3)
    cond = (torch.rand(2, 1, 4) > 0.5).to(torch.float64)
    fx.add("where.cond", cond)
    differentiable(fx, "where", [("a", mf.rand(3, 1)), ("b", mf.rand(4))],
                   lambda a, b: torch.where(cond != 0, a, b))


def make_clamp(fx):
    torch.manual_seed(4)
    x = mf.rand(2, 6)
    x[0, 0], x[0, 1], x[1, 2] = -0.5, 0.5, 0.5  # on the bounds: gradient 1 there
    differentiable(fx, "clamp", [("x", x)], lambda x: torch.clamp(x, -0.5, 0.5))
    torch.manual_seed(5)
    differentiable(fx, "clamp_min", [("x", mf.rand(3, 4))], lambda x: torch.clamp(x, min=0.25))


def make_indices(fx):
    # small integers: ties everywhere, where argmax must take the first
    torch.manual_seed(6)
    x = torch.randint(0, 4, (3, 5)).to(torch.float64)
    fx.add("argmax.x", x)
    fx.add("argmax.out1", torch.argmax(x, dim=1))
    fx.add("argmax.out0", torch.argmax(x, dim=0, keepdim=True))
    # topk on values without ties (PyTorch gives no order for equal values)
    for name, seed, shape, k, dim, largest in (("topk", 7, (2, 3, 6), 3, -1, True),
                                               ("topk_small", 8, (2, 4, 3), 2, 1, False)):
        torch.manual_seed(seed)
        x = mf.leaf(mf.rand(*shape))
        v, i = torch.topk(x, k, dim=dim, largest=largest)
        L, w = mf.loss_of(v)
        L.backward()
        fx.add(name + ".x", x)
        fx.add(name + ".w", w)
        fx.add(name + ".out", v)
        fx.add(name + ".indices", i)
        fx.add_grads([(name + ".x", x)])


def make_sequence(fx):
    # a learned position table [max_T, C] = [5, 4] (GPT-2's wpe, ViT's
    # pos_embed) added to x [B, T, C] = [2, 3, 4]: x + P[:T]
    torch.manual_seed(9)
    differentiable(fx, "positions", [("x", mf.rand(2, 3, 4)), ("pos.weight", mf.rand(5, 4, scale=0.02))],
                   lambda x, p: x + p[: x.shape[1]])
    # ViT's class token: cat(cls.expand(B, -1, -1), x, dim=1)
    torch.manual_seed(10)
    differentiable(fx, "prepend", [("cls", mf.rand(1, 1, 4)), ("x", mf.rand(2, 3, 4))],
                   lambda c, x: torch.cat([c.expand(x.shape[0], -1, -1), x], dim=1))


if __name__ == "__main__":
    fx = mf.Fixture("expand, repeat, where, clamp, argmax, topk, learned positions, class token: inputs, "
                    "outputs and gradients of L = sum(out * w)")
    fx.generator = "tests/reference/make_user_ops.py"
    make_shapes(fx)
    make_clamp(fx)
    make_indices(fx)
    make_sequence(fx)
    fx.save("user_ops.safetensors")
