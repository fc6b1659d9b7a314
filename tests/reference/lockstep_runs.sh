#!/usr/bin/env bash
# tests/reference/lockstep_runs.sh OUTDIR [RECIPE...]: the lock-step
# comparison of docs/translator.md ("Step for step").  On the training part
# of `translate split`, dropout off, seed 0, one thread, for each recipe
# (default: d2l default) and each precision:
#   1. attograd trains EPOCHS epochs (build/translate64 in double,
#      build/translate in float), writing its initial checkpoint
#      (--save-init), its steps (--trace) and its final checkpoint;
#   2. the twin (translator.py lockstep) takes the same steps from the same
#      weights, in float64 or float32, and again from weights perturbed by
#      one rounding (1e-16 in float64, 2^-24 in float32): how far the run
#      itself carries a difference of that size.
# Writes OUTDIR/lockstep-<recipe>-<double|float>.json;
# tests/reference/parity_table.py lockstep OUTDIR prints the table.
# EPOCHS (5) and PRECISIONS ("double float") choose the runs.
# The recipes:
#   d2l      d2l's chapter as the held-out comparison trains it: post-norm,
#            --init d2l, plain SGD lr 1, constant, clipping at 1;
#   d2l-0.1  the same at lr 0.1;
#   default  translate train's defaults (pre-norm, --init scaled, Nesterov
#            momentum 0.9, lr 0.3 warmed up over 400 steps, cosine decay).
set -eu
out=${1:?usage: lockstep_runs.sh OUTDIR [RECIPE...]}
shift
[ $# -gt 0 ] && recipes=("$@") || recipes=(d2l default)
EPOCHS=${EPOCHS:-5} PRECISIONS=${PRECISIONS:-double float}
mkdir -p "$out"
build/translate split --data examples/data/eng-fra.tsv --train "$out/train.tsv" --test "$out/test.tsv" > /dev/null
for r in "${recipes[@]}"; do
    case $r in
        d2l) model=(--post-norm --init d2l); recipe=(--lr 1 --momentum 0 --no-nesterov --schedule constant --warmup 0 --clip 1) ;;
        d2l-0.1) model=(--post-norm --init d2l); recipe=(--lr 0.1 --momentum 0 --no-nesterov --schedule constant --warmup 0 --clip 1) ;;
        default) model=(); recipe=() ;;
        *) echo "lockstep_runs.sh: unknown recipe $r" >&2; exit 2 ;;
    esac
    for p in $PRECISIONS; do
        if [ $p = double ]; then bin=build/translate64 dtype=float64 eps=1e-16
        else bin=build/translate dtype=float32 eps=5.96e-8; fi
        name=$out/lockstep-$r-$p
        OMP_NUM_THREADS=1 $bin train --data "$out/train.tsv" --out "$name.final.safetensors" --epochs "$EPOCHS" \
            --dropout 0 --seed 0 --threads 1 --quiet "${model[@]}" "${recipe[@]}" \
            --save-init "$name.init.safetensors" --trace "$name.tsv" > "$name.log"
        /usr/bin/python3 tests/reference/translator.py lockstep --model "$name.init.safetensors" --data "$out/train.tsv" \
            --trace "$name.tsv" --final "$name.final.safetensors" --epochs "$EPOCHS" --dtype $dtype --perturb $eps \
            --json "$name.json" --quiet "${recipe[@]}" | tee -a "$name.log"
    done
done
