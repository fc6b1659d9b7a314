#!/usr/bin/python3
"""ops.py: the PyTorch side of `make bench`, part 4.

Times single ops on float32 tensors of N elements, forward and backward
apart, as tests/bench/bench.c times attograd's:

    forward:  y = op(x), x requiring grad (the graph is recorded)
    backward: torch.autograd.grad(y, x, dy, retain_graph=True), the op's
              backward alone (dy given, a new dx returned; sum_rows's
              dx, a broadcast view of dy, made contiguous)

softmax, log_softmax, add_bias, sum_rows, layer_norm and cross_entropy run
over rows of ROW values ([N / ROW, ROW]); the other operands (b, gain,
bias, targets) are constants that need no gradient.
Inputs: uniform in [-4, 4], or [0.1, 4] for log and sqrt.

    /usr/bin/python3 tests/bench/ops.py --threads 1 [--seconds S] N [N ...]

Prints one line per op and size: "name N forward-ns-per-element
backward-ns-per-element".
"""
import argparse
import os
import sys
import time

ROW = 128
# Ops whose dx PyTorch returns as a view of dy (sum's: dy broadcast along
# the summed axis, stride 0, no values written): made contiguous, so that
# both sides write the n values of dx.
VIEW_GRADS = {"sum_rows"}


def best_time(fn, seconds):
    """Seconds per call: the best round of several (the machine is shared)."""
    for _ in range(3):
        fn()
    best, spent = float("inf"), 0.0
    while spent < seconds or best == float("inf"):
        t0 = time.perf_counter()
        n = 0
        while n < 2 or time.perf_counter() - t0 < seconds / 5:
            fn()
            n += 1
        dt = time.perf_counter() - t0
        best, spent = min(best, dt / n), spent + dt
    return best


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seconds", type=float, default=0.2)
    p.add_argument("sizes", nargs="+", type=int)
    a = p.parse_args()
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(a.threads)
    try:
        import torch
    except ImportError:
        sys.exit("ops.py: PyTorch is missing (apt-get install python3-torch)")
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    F = torch.nn.functional
    ops = [
        ("exp", torch.exp, False, -4, 4),
        ("log", torch.log, False, 0.1, 4),
        ("sqrt", torch.sqrt, False, 0.1, 4),
        ("tanh", torch.tanh, False, -4, 4),
        ("gelu", F.gelu, False, -4, 4),
        ("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"), False, -4, 4),
        ("relu", torch.relu, False, -4, 4),
        ("softmax", lambda x: torch.softmax(x, -1), True, -4, 4),
        ("log_softmax", lambda x: torch.log_softmax(x, -1), True, -4, 4),
        ("add", lambda x: x + other["b"], False, -4, 4),
        ("add_bias", lambda x: x + other["bias"], True, -4, 4),
        ("mul", lambda x: x * other["b"], False, -4, 4),
        ("sum_rows", lambda x: x.sum(-1), True, -4, 4),
        ("layer_norm", lambda x: F.layer_norm(x, (ROW,), other["gain"], other["bias"], 1e-5), True, -4, 4),
        ("cross_entropy", lambda x: F.cross_entropy(x, other["targets"]), True, -4, 4),
    ]
    other = {}  # the other operands, constants made for each size
    for n in a.sizes:
        for name, op, rows, lo, hi in ops:
            shape = (n // ROW, ROW) if rows else (n,)
            x = (torch.rand(shape) * (hi - lo) + lo).requires_grad_(True)
            other["b"] = torch.rand(shape) * 2 - 1
            other["gain"] = torch.rand(ROW) + 0.5
            other["bias"] = torch.rand(ROW) * 0.2 - 0.1
            other["targets"] = torch.randint(0, ROW, (n // ROW,))
            fwd = best_time(lambda: op(x), a.seconds)  # recording the graph, as attograd does
            y = op(x)
            dy = torch.rand(y.shape) * 2 - 1
            if name in VIEW_GRADS:  # dx as values, as attograd writes them
                bwd = best_time(lambda: torch.autograd.grad(y, x, dy, retain_graph=True)[0].contiguous(), a.seconds)
            else:
                bwd = best_time(lambda: torch.autograd.grad(y, x, dy, retain_graph=True), a.seconds)
            print("%s %d %.4f %.4f" % (name, n, fwd / n * 1e9, bwd / n * 1e9), flush=True)


if __name__ == "__main__":
    main()
