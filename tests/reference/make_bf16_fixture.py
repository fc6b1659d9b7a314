#!/usr/bin/python3
"""make_bf16_fixture.py: PyTorch's rounding of float32 to bfloat16, for
tests/test_bf16.c: tests/reference/bf16_round.txt, one value a line,

    <float32 bits, hex> <bits of torch's x.bfloat16(), hex> <what it is>

Run with Debian's python3-torch:  /usr/bin/python3 tests/reference/make_bf16_fixture.py

The values: hostile ones (ties to even both ways, one ulp either side of a
tie, subnormals and their ties, the largest finite floats on both sides of
the threshold 0x7f7f8000 that rounds to inf, +-inf, NaNs with payloads in
the high and in the low half, -0), then random floats of every exponent
(random bit patterns) and random weights (normal, as an initialiser draws
them).  Each value is rounded alone (x.bfloat16() of a 0-dim tensor: c10's
scalar rule, round_to_nearest_even) and inside one long tensor (the
vectorised path), and the script stops if the two differ anywhere but in a
NaN's bits: a NaN stays a NaN on both paths, but the scalar path writes
0x7fc0 and the AVX2/AVX-512 paths 0xffff.  The fixture keeps the scalar
rule's bits, the one rule that does not depend on the CPU."""
import struct
import sys

import torch


def f32(bits):
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def hostile():
    v = []
    for sign in (0, 0x80000000):
        for bits, what in [
            (0x3f808000, "tie, even below (1.00390625)"),
            (0x3f818000, "tie, odd below: rounds up"),
            (0x3f807fff, "just under a tie"),
            (0x3f808001, "just over a tie"),
            (0x3f80ffff, "carry into the next bf16"),
            (0x3fffffff, "carry into the exponent"),
            (0x00000001, "smallest subnormal"),
            (0x00008000, "subnormal tie, even below"),
            (0x00018000, "subnormal tie, odd below"),
            (0x007fffff, "largest subnormal: rounds to the smallest normal"),
            (0x00800000, "smallest normal"),
            (0x7f7f0000, "largest finite bf16"),
            (0x7f7f7fff, "largest float that stays finite"),
            (0x7f7f8000, "tie at the top: rounds to inf"),
            (0x7f7fffff, "largest finite float: rounds to inf"),
            (0x7f800000, "inf"),
            (0x7fc00000, "quiet NaN"),
            (0x7f800001, "signalling NaN, payload in the low half"),
            (0x7fa00000, "signalling NaN, payload in the high half"),
            (0x7fffffff, "NaN, all payload bits"),
            (0x00000000, "zero"),
            (0x3f800000, "one"),
        ]:
            v.append((sign | bits, ("-" if sign else "+") + " " + what))
    return v


def main():
    gen = torch.Generator().manual_seed(20261207)
    vals = hostile()
    for b in torch.randint(0, 2**32, (400,), generator=gen, dtype=torch.int64).tolist():
        vals.append((b, "random bits"))
    for x in (torch.randn(400, generator=gen, dtype=torch.float32) * 0.02).tolist():
        vals.append((struct.unpack("<I", struct.pack("<f", x))[0], "random weight"))
    bits = torch.tensor([b - 2**32 if b >= 2**31 else b for b, _ in vals], dtype=torch.int32)
    whole = bits.view(torch.float32).bfloat16().view(torch.int16).tolist()
    out = ["# make_bf16_fixture.py, torch %s: float32 bits, torch's x.bfloat16() bits, what" % torch.__version__]
    def nan(h):
        return (h & 0x7F80) == 0x7F80 and (h & 0x7F) != 0

    for (b, what), w in zip(vals, whole):
        one = torch.tensor(f32(b), dtype=torch.float32).bfloat16().view(torch.int16).item() & 0xFFFF
        w &= 0xFFFF
        if one != w and not (nan(one) and nan(w)):
            sys.exit("torch's scalar and vector rounding differ at %08x: %04x, %04x" % (b, one, w))
        out.append("%08x %04x %s" % (b, one, what))
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
