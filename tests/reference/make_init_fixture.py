#!/usr/bin/python3
"""make_init_fixture.py: the moments of the PyTorch twin's initial weights
under PyTorch's module defaults (tests/test_init.c compares attograd's
AG_INIT_TORCH with them).

    /usr/bin/python3 tests/reference/make_init_fixture.py

The twin is the GPT of gpt.py (nn.Linear, nn.Embedding, nn.LayerNorm) made
without its init_weights(), so every module draws what its reset_parameters()
draws.  It writes init_torch.txt next to itself, one line per parameter:

    name n mean var m4 maxabs

(var and m4 the second and fourth central moments, divided by n).  The C
test checks its own draws against the bound and against these moments within
6 standard errors of the difference of two samples.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt import define_model  # noqa: E402

import torch  # noqa: E402

# tests/test_init.c makes the same configuration
CONFIG = {"vocab": 96, "context": 64, "hidden": 128, "heads": 4, "ffn": 512, "layers": 2,
          "activation": "gelu", "dropout": 0.0, "untied": 1}


def main():
    torch.manual_seed(0)
    GPT = define_model(torch)
    GPT.init_weights = lambda self: None  # PyTorch's module defaults
    model = GPT(CONFIG).double()
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "init_torch.txt")
    with open(out, "w") as f:
        f.write("# tests/reference/make_init_fixture.py, torch %s: name n mean var m4 maxabs\n"
                % torch.__version__)
        for name, p in model.named_parameters():
            x = p.detach().flatten()
            mean = x.mean().item()
            d = x - mean
            f.write("%s %d %.17g %.17g %.17g %.17g\n" % (name, x.numel(), mean, (d * d).mean().item(),
                                                         (d ** 4).mean().item(), x.abs().max().item()))


if __name__ == "__main__":
    main()
