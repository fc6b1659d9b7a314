#!/usr/bin/python3
"""Write tests/reference/optim.txt: parameter values after each of 3 steps of
torch.optim.SGD / Adam / AdamW, for tests/test_optim.c to reproduce.

Run from the repository root with Debian's PyTorch:
    /usr/bin/python3 tests/reference/make_optim_fixtures.py

Two float64 parameters, p0 [2, 3] and p1 [4], start from fixed values.  At
step k = 1, 2, 3 the gradient is a fixed function of the current values,
    grad = 2 * p + 0.1 * k,
assigned to p.grad before optimizer.step().

Format of optim.txt (lines starting with '#' are comments):
    <case> <step> <param> v0 v1 ...      values as %.17g, row-major
step 0 holds the starting values.  The hyperparameters of each case are in
CASES below and must match the table in tests/test_optim.c.
"""
import os

import torch

P0 = [0.5, -1.25, 2.0, -0.75, 1.5, 3.0]  # shape [2, 3]
P1 = [-2.0, 0.25, 1.0, -0.5]             # shape [4]
STEPS = 3

# name -> (constructor, keyword arguments)
CASES = [
    ("sgd", torch.optim.SGD, dict(lr=0.02)),
    ("sgd_momentum", torch.optim.SGD, dict(lr=0.02, momentum=0.9)),
    ("sgd_nesterov", torch.optim.SGD,
     dict(lr=0.02, momentum=0.9, nesterov=True, weight_decay=0.01)),
    ("adam", torch.optim.Adam, dict(lr=1e-2, betas=(0.9, 0.999), eps=1e-8)),
    ("adam_wd", torch.optim.Adam,
     dict(lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)),
    ("adamw", torch.optim.AdamW,
     dict(lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)),
]


def values(name, step, pname, p):
    return "%s %d %s %s\n" % (name, step, pname,
                              " ".join("%.17g" % v for v in p.detach().reshape(-1).tolist()))


def main():
    torch.manual_seed(0)  # nothing random is drawn; set for good measure
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "optim.txt")
    lines = ["# written by tests/reference/make_optim_fixtures.py with torch %s\n" % torch.__version__,
             "# <case> <step> <param> values...   grad = 2 * p + 0.1 * step\n"]
    for name, ctor, kw in CASES:
        lines.append("# %s: %s(%s)\n" % (name, ctor.__name__,
                                         ", ".join("%s=%r" % kv for kv in sorted(kw.items()))))
        p0 = torch.tensor(P0, dtype=torch.float64).reshape(2, 3).requires_grad_()
        p1 = torch.tensor(P1, dtype=torch.float64).requires_grad_()
        params = [p0, p1]
        names = ["p0", "p1"]
        opt = ctor(params, **kw)
        for pname, p in zip(names, params):
            lines.append(values(name, 0, pname, p))
        for step in range(1, STEPS + 1):
            for p in params:
                p.grad = (2 * p + 0.1 * step).detach()
            opt.step()
            for pname, p in zip(names, params):
                lines.append(values(name, step, pname, p))
    with open(out, "w") as f:
        f.writelines(lines)
    print("wrote", out)


if __name__ == "__main__":
    main()
