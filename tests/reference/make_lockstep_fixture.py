#!/usr/bin/python3
"""make_lockstep_fixture.py [BUILD]: the fixture of tests/translate/test_lockstep.sh,
which checks in `make test`, without PyTorch, that attograd's training steps
are PyTorch's.

  1. build/translate64 (attograd in double) trains a small model on
     tests/reference/tiny.tsv for a few epochs, dropout off, writing its
     initial checkpoint (--save-init) to lockstep_init.safetensors and its
     steps (--trace) to a scratch file;
  2. the twin (translator.py lockstep) takes the same steps from that
     checkpoint, batch for batch, in float64, and again from weights
     perturbed by 1e-16 (to show that this run does not amplify rounding:
     the fixture is refused when the perturbed twin ends more than 1e-12
     away, so that a 1e-9 tolerance tests the code, not luck);
  3. lockstep_steps.tsv gets, per step, the pairs of its batch (C's plan)
     and the twin's loss and gradient norm.

(In float no such fixture holds across compilers and kernels: rounding
moves a ReLU's input across 0 sooner or later, and the gradient jumps
there; docs/translator.md, "Step for step", measures it.)

The test resumes attograd from lockstep_init.safetensors with the flags
recorded in the file's first line and compares step by step.  Run from the
repository root with Debian's PyTorch: /usr/bin/python3
tests/reference/make_lockstep_fixture.py."""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import translator  # noqa: E402

DATA = "tests/reference/tiny.tsv"
INIT = "tests/reference/lockstep_init.safetensors"
STEPS = "tests/reference/lockstep_steps.tsv"
EPOCHS = 3
# the model of d2l's chapter, small; its recipe: plain SGD, constant rate, clipping at 1
MODEL = ["--hidden", "16", "--heads", "2", "--ffn", "32", "--layers", "2", "--max-len", "10", "--post-norm",
         "--init", "d2l", "--dropout", "0", "--seed", "0"]
RECIPE = ["--batch", "16", "--epochs", str(EPOCHS), "--lr", "0.1", "--momentum", "0", "--no-nesterov",
          "--schedule", "constant", "--warmup", "0", "--clip", "1"]
SELF_LIMIT = 1e-12


def twin(torch, dtype, trace, perturb=None):
    """The twin's (loss, norm) per step of trace, from INIT."""
    model, sv, tv, _ = translator.load_c_model(torch, INIT, dtype)
    if perturb:
        gen = torch.Generator().manual_seed(1)
        with torch.no_grad():
            for p in model.parameters():
                p.mul_(1 + perturb * torch.randn(p.shape, generator=gen, dtype=torch.float64).to(dtype))
    pairs, _ = translator.load_pairs(DATA)
    d = translator.Dataset(torch, pairs, sv, tv, model.cfg["max_len"])
    flags = translator.main_parser().parse_args(["lockstep", "--model", INIT, "--data", DATA, "--trace", "-"] + RECIPE)
    return [(loss, norm) for loss, norm, _, _ in translator.replay(torch, model, d, trace, flags, "trace")]


def main(argv):
    build = argv[1] if len(argv) > 1 else "build"
    torch = translator.import_torch(1)
    with tempfile.TemporaryDirectory() as tmp:
        trace_path = os.path.join(tmp, "trace.tsv")
        subprocess.run([os.path.join(build, "translate64"), "train", "--data", DATA, "--out",
                        os.path.join(tmp, "end.safetensors"), "--threads", "1", "--quiet", "--save-init", INIT,
                        "--trace", trace_path] + MODEL + RECIPE, check=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
        trace = translator.read_trace(trace_path)
    t64 = twin(torch, torch.float64, trace)
    again = twin(torch, torch.float64, trace, perturb=1e-16)
    drift = max(translator.rel(b[0], a[0]) for a, b in zip(t64, again))
    c_worst = max(translator.rel(s["loss"], a[0]) for s, a in zip(trace, t64))
    print("%d steps; attograd (double) against the twin (float64): largest relative loss difference %.2e; the twin "
          "from weights perturbed by 1e-16: %.2e" % (len(trace), c_worst, drift))
    if drift > SELF_LIMIT:
        sys.exit("make_lockstep_fixture.py: this run amplifies rounding to %.2e (> %g): choose a gentler recipe"
                 % (drift, SELF_LIMIT))
    with open(STEPS, "w") as f:
        f.write("# %s: translate train --resume %s --data %s %s\n" % (os.path.basename(STEPS), INIT, DATA,
                                                                      " ".join(RECIPE)))
        f.write("# written by tests/reference/make_lockstep_fixture.py, torch %s; per step the pairs of its batch "
                "(attograd's plan) and the twin's loss and gradient norm (before clipping), in float64\n"
                % torch.__version__)
        f.write("step\tloss\tnorm\tpairs\n")
        for s, a in zip(trace, t64):
            f.write("%d\t%.17g\t%.17g\t%s\n" % (s["step"], a[0], a[1], ",".join(map(str, s["pairs"]))))
    print("wrote %s and %s" % (INIT, STEPS))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
