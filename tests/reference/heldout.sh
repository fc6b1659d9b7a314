#!/usr/bin/env bash
# tests/reference/heldout.sh OUTDIR [SEEDS...]: the held-out comparison of
# docs/translator.md.  Splits examples/data/eng-fra.tsv by distinct source
# (translate split), then trains attograd (build/translate) and its PyTorch
# twin (tests/reference/translator.py, /usr/bin/python3) on the training
# part, one thread each, for every seed (default 0 1 2), both
# initialisations (--init scaled, --init d2l) and both recipes:
#   r1  the default: SGD, Nesterov momentum 0.9, lr 0.3, 400 warmup steps,
#       cosine decay, 50 epochs;
#   r2  plain SGD: lr 1.0, no momentum, constant rate, 30 epochs;
# gradient clipping at norm 1 in both; post-norm blocks (--post-norm, the
# default when this was measured).  Each run writes OUTDIR/<impl>_<recipe>_
# <init>_s<seed>.json; tests/reference/heldout_table.py OUTDIR prints the
# table.  Runs one after the other (a run takes 1 to 3 minutes for attograd,
# 3 to 6 for PyTorch on one free core); JOBS=2 runs two at a time.
set -eu
out=${1:?usage: heldout.sh OUTDIR [SEEDS...]}
shift
[ $# -gt 0 ] && seeds=("$@") || seeds=(0 1 2)
jobs=${JOBS:-1}
mkdir -p "$out"
build/translate split --data examples/data/eng-fra.tsv --train "$out/train.tsv" --test "$out/test.tsv"
r1=(--epochs 50)
r2=(--epochs 30 --lr 1.0 --momentum 0 --no-nesterov --schedule constant --warmup 0 --clip 1)
one() { # one IMPL RECIPE INIT SEED
    local name=$1_$2_$3_s$4 flags
    if [ "$2" = r1 ]; then flags=("${r1[@]}"); else flags=("${r2[@]}"); fi
    local common=(--data "$out/train.tsv" --test "$out/test.tsv" --threads 1 --seed "$4" --init "$3" --post-norm
                  "${flags[@]}" --json "$out/$name.json" --quiet)
    if [ "$1" = c ]; then OMP_NUM_THREADS=1 build/translate train "${common[@]}" --out "$out/$name.safetensors"
    else /usr/bin/python3 tests/reference/translator.py train "${common[@]}"; fi > "$out/$name.log" 2>&1
    echo "$name: $(tail -n 1 "$out/$name.log")"
}
for s in "${seeds[@]}"; do
    for impl in c pt; do
        for rec in r1 r2; do
            for init in scaled d2l; do
                one "$impl" "$rec" "$init" "$s" &
                while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
            done
        done
    done
done
wait
/usr/bin/python3 tests/reference/heldout_table.py "$out"
