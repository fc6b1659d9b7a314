#!/usr/bin/env bash
# tests/translate/test_lockstep.sh BUILD_DIR: attograd's training steps are
# PyTorch's, without PyTorch.  tests/reference/make_lockstep_fixture.py ran
# the twin (tests/reference/translator.py lockstep) from the committed
# initial weights (tests/reference/lockstep_init.safetensors, written by
# translate64 train --save-init) along attograd's batch plan; its losses and
# gradient norms per step are in tests/reference/lockstep_steps.tsv.  Here:
#   - translate64 (double), resumed from those weights with the fixture's
#     flags, takes the same batches (the plan of its --trace) with losses and
#     gradient norms within 1e-9 relative of the twin's float64 ones, every
#     step;
#   - --save-init writes a checkpoint that --resume continues as the run that
#     wrote it, bit for bit (the same trace, the same final file).
# Prints 'N passed, N failed' last; exits 1 on any failure.
set -u
B=${1:-build}
FIX=tests/reference/lockstep_steps.tsv
TOL=1e-9
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
no() { fail=$((fail + 1)); echo "FAIL $1"; }

# the flags the fixture was made with: its first line, after "translate train"
read -r -a flags <<< "$(head -n 1 "$FIX" | sed 's/^.*translate train //')"

# compare TRACE: every step's pairs are the fixture's, loss and gradient
# norm within TOL relative of the twin's; prints the largest differences
compare() {
    awk -F'\t' -v tol="$TOL" '
        function rel(a, b) { d = a - b; if (d < 0) d = -d; if (b < 0) b = -b; return b ? d / b : d }
        FNR == NR { if ($1 ~ /^[0-9]+$/) { loss[$1] = $2; norm[$1] = $3; pairs[$1] = $4; n++ } next }
        FNR > 1 {
            seen++
            if (!($1 in loss)) { bad = bad sprintf(" step %s not in the fixture;", $1); next }
            if ($7 != pairs[$1]) { bad = bad sprintf(" step %s: another batch;", $1); next }
            l = rel($4, loss[$1]); g = rel($5, norm[$1])
            if (l > wl) wl = l
            if (g > wg) wg = g
            if ((l > tol || g > tol) && ++off <= 3) bad = bad sprintf(" step %s: loss %.17g, twin %.17g;", $1, $4, loss[$1])
        }
        END {
            if (off > 3) bad = bad sprintf(" %d steps in all differ;", off)
            if (seen != n) bad = bad sprintf(" %d steps, the fixture has %d;", seen, n)
            printf "%d steps, largest relative difference: loss %.2e, gradient norm %.2e%s\n", seen, wl, wg, bad
            exit bad != ""
        }' "$FIX" "$1"
}

# 1. double: the twin's steps to 1e-9
if "$B/translate64" train "${flags[@]}" --out "$tmp/d.safetensors" --threads 1 --quiet --trace "$tmp/d.tsv" \
    > "$tmp/d.log" 2>&1; then
    if r=$(compare "$tmp/d.tsv"); then ok "double, lock-step with the twin (tolerance $TOL): $r"
    else no "double, lock-step with the twin (tolerance $TOL): $r"; fi
else
    no "translate64 train: $(tail -n 3 "$tmp/d.log")"
fi

# 2. --save-init, then --resume from it: the run that wrote it, bit for bit
# (dropout on: the random streams are in the checkpoint too)
small=(--data tests/reference/tiny.tsv --hidden 16 --heads 2 --ffn 32 --layers 1 --batch 32 --epochs 2 --seed 5
       --threads 1 --quiet)
if "$B/translate" train "${small[@]}" --out "$tmp/a.safetensors" --save-init "$tmp/a0.safetensors" \
       --trace "$tmp/a.tsv" > "$tmp/a.log" 2>&1 &&
   "$B/translate" train "${small[@]}" --resume "$tmp/a0.safetensors" --out "$tmp/b.safetensors" \
       --trace "$tmp/b.tsv" > "$tmp/b.log" 2>&1 &&
   [ "$(wc -l < "$tmp/a.tsv")" -gt 2 ] && cmp -s "$tmp/a.tsv" "$tmp/b.tsv" &&
   cmp -s "$tmp/a.safetensors" "$tmp/b.safetensors"; then
    ok "--resume from --save-init is the run that wrote it ($(($(wc -l < "$tmp/a.tsv") - 1)) steps, same trace and file)"
else
    no "--resume from --save-init differs: $(tail -n 2 "$tmp/a.log" "$tmp/b.log")"
fi

echo "lockstep: $pass passed, $fail failed"
[ "$fail" = 0 ]
