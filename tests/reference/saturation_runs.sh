#!/usr/bin/env bash
# tests/reference/saturation_runs.sh OUTDIR [SEEDS...]: the measurements of
# docs/translator.md, "Cures: pre-norm and QK-norm".  Splits
# examples/data/eng-fra.tsv as `make run` does (translate split), then
# trains build/translate on the training part with the default recipe
# (`make run`'s: Nesterov + cosine, 50 epochs, --init scaled, one thread)
# three ways, for every seed (default 0 1 2):
#   post_norm  --post-norm (the default up to 0.2.0);
#   pre_norm   --pre-norm, the default now, as `make run`;
#   qk_norm    --post-norm --qk-norm;
# each writing OUTDIR/<variant>-s<seed>.json (held-out exact match and BLEU,
# the attention probe per epoch and layer) and, for seed 0, the entropy
# picture OUTDIR/<variant>-s0.svg.  One run at a time, under nice.
# TRANSLATE names the program (default build/translate).
# tests/reference/saturation_table.py OUTDIR prints the tables.
set -eu
out=${1:?usage: saturation_runs.sh OUTDIR [SEEDS...]}
shift
[ $# -gt 0 ] && seeds=("$@") || seeds=(0 1 2)
tr=${TRANSLATE:-build/translate}
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$tr" split --data examples/data/eng-fra.tsv --train "$work/train.tsv" --test "$work/test.tsv"
for s in "${seeds[@]}"; do
    for v in post_norm pre_norm qk_norm; do
        flags=(--post-norm)
        [ "$v" = pre_norm ] && flags=(--pre-norm)
        [ "$v" = qk_norm ] && flags=(--post-norm --qk-norm)
        [ "$s" = 0 ] && flags+=(--entropy-plot "$out/$v-s0.svg")
        start=$(date +%s)
        OMP_NUM_THREADS=1 nice "$tr" train --data "$work/train.tsv" --test "$work/test.tsv" --threads 1 \
            --seed "$s" "${flags[@]}" --out "$work/model.safetensors" --json "$out/$v-s$s.json" > "$work/log" 2>&1
        echo "$v seed $s: $(tail -n 1 "$work/log") ($(( $(date +%s) - start )) s)"
    done
done
