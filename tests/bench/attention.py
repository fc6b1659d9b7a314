#!/usr/bin/python3
"""attention.py: the PyTorch side of `make bench`, part 2.

Times forward + backward of the multi-head self-attention block of the
PyTorch tutorial (q/k/v/o nn.Linear with bias, scores scaled by 1/sqrt(D),
an optional causal mask filled with -1e9, softmax, P V, heads split and
joined with view/transpose, then LayerNorm(x + out)), with the loss
mean(y * y), exactly as tests/bench/bench.c times attograd's.

    /usr/bin/python3 tests/bench/attention.py --threads N [--causal]
        [--seconds S] B,T,C,H [B,T,C,H ...]

Prints one line per configuration: "B T C H milliseconds-per-step".  The
thread count is fixed before torch starts: torch.set_num_threads and the
OMP / OpenBLAS / MKL variables (the caller sets them too), so that "1
thread" is not quietly helped by a BLAS pool.
"""
import argparse
import math
import os
import sys
import time


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--causal", action="store_true")
    p.add_argument("--seconds", type=float, default=0.5)
    p.add_argument("configs", nargs="+")
    a = p.parse_args()
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(a.threads)
    try:
        import torch
    except ImportError:
        sys.exit("attention.py: PyTorch is missing (apt-get install python3-torch)")
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    nn = torch.nn

    class MultiHeadAttention(nn.Module):
        def __init__(self, d_model, num_heads):
            super().__init__()
            self.d_model, self.num_heads, self.d_k = d_model, num_heads, d_model // num_heads
            self.W_q = nn.Linear(d_model, d_model)
            self.W_k = nn.Linear(d_model, d_model)
            self.W_v = nn.Linear(d_model, d_model)
            self.W_o = nn.Linear(d_model, d_model)

        def scaled_dot_product_attention(self, Q, K, V, mask=None):
            scores = torch.matmul(Q, K.transpose(-2, -1)) / math.sqrt(self.d_k)
            if mask is not None:
                scores = scores.masked_fill(mask == 0, -1e9)
            probs = torch.softmax(scores, dim=-1)
            return torch.matmul(probs, V)

        def split_heads(self, x):
            B, T, _ = x.size()
            return x.view(B, T, self.num_heads, self.d_k).transpose(1, 2)

        def combine_heads(self, x):
            B, _, T, _ = x.size()
            return x.transpose(1, 2).contiguous().view(B, T, self.d_model)

        def forward(self, Q, K, V, mask=None):
            Q = self.split_heads(self.W_q(Q))
            K = self.split_heads(self.W_k(K))
            V = self.split_heads(self.W_v(V))
            return self.W_o(self.combine_heads(self.scaled_dot_product_attention(Q, K, V, mask)))

    class Block(nn.Module):
        """LayerNorm(x + MultiHeadAttention(x, x, x))."""

        def __init__(self, d_model, num_heads):
            super().__init__()
            self.attention = MultiHeadAttention(d_model, num_heads)
            self.norm = nn.LayerNorm(d_model)

        def forward(self, x, mask):
            return self.norm(x + self.attention(x, x, x, mask))

    for cfg in a.configs:
        B, T, C, H = (int(v) for v in cfg.split(","))
        block = Block(C, H)
        x = torch.rand(B, T, C) * 2 - 1
        mask = torch.tril(torch.ones(T, T)) if a.causal else None

        def step():
            block.zero_grad(set_to_none=False)
            y = block(x, mask)
            (y * y).mean().backward()

        for _ in range(3):
            step()
        # the best of several rounds: the machine may be busy with others
        best, spent = float("inf"), 0.0
        while spent < a.seconds or best == float("inf"):
            t0 = time.perf_counter()
            n = 0
            while n < 2 or time.perf_counter() - t0 < a.seconds / 5:
                step()
                n += 1
            dt = time.perf_counter() - t0
            best, spent = min(best, dt / n), spent + dt
        print("%d %d %d %d %.6f" % (B, T, C, H, best * 1e3), flush=True)


if __name__ == "__main__":
    main()
