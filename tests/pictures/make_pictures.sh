#!/usr/bin/env bash
# tests/pictures/make_pictures.sh BUILD_DIR OUT_DIR [--trained]: every
# picture of examples/pictures, made again into OUT_DIR, deterministically
# (fixed seeds, one thread).
#   cheap (a second):   attention_demo --svg (heatmaps, positions, the
#                       graphs attention.dot and decoder.dot), backward_tour
#                       --dot backward.dot; each .dot rendered to .svg with
#                       Graphviz's dot when it is installed
#   live (ten seconds):  the live pages' screenshots, live_*.png, and
#                       live_pictures.txt (make_live_pictures.sh: make wasm,
#                       chromium, node)
#   --trained (about a minute and a half on 2 cores; on AVX-512 CPUs only,
#                       whose kernels made the committed ones): trains the translator
#                       as `make run` does (a tenth of the distinct English
#                       sources held out, the default 50 epochs, pre-norm,
#                       seed 0) for loss.svg and entropy.svg, and runs it on
#                       "i lost ." for translator_cross.svg,
#                       translator_decoder.svg and translator_encoder.svg;
#                       then the same with --post-norm for
#                       entropy_post_norm.svg and (on "i lost .")
#                       translator_encoder_post_norm.svg, and with --post-norm
#                       --qk-norm for entropy_qk_norm.svg (two more runs)
# Exits non-zero when a program fails.
set -eu
B=$(cd "$1" && pwd)
mkdir -p "$2"
out=$(cd "$2" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
export OMP_NUM_THREADS=1

"$B/attention_demo" --seed 0 --svg "$out" > /dev/null
"$B/backward_tour" --dot "$out/backward.dot" > /dev/null
if command -v dot > /dev/null; then
    for d in attention decoder backward; do dot -Tsvg "$out/$d.dot" -o "$out/$d.svg"; done
fi

bash "$root/tests/pictures/make_live_pictures.sh" "$B" "$out"

if [ "${3:-}" = --trained ] && ! grep -qw avx512f /proc/cpuinfo 2> /dev/null; then
    echo "note: no AVX-512 here: the trained translator's pictures are not made (other kernels round otherwise)"
elif [ "${3:-}" = --trained ]; then
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    "$B/translate" split --data "$root/examples/data/eng-fra.tsv" --train "$tmp/train.tsv" --test "$tmp/test.tsv" \
        > /dev/null
    "$B/translate" train --data "$tmp/train.tsv" --test "$tmp/test.tsv" --out "$tmp/m.safetensors" \
        --seed 0 --threads 1 --plot "$out/loss.svg" --entropy-plot "$out/entropy.svg" --quiet
    "$B/translate" run --model "$tmp/m.safetensors" --attention "$tmp/att" "i lost ." > /dev/null
    cp "$tmp/att/0-cross-1.svg" "$out/translator_cross.svg"
    cp "$tmp/att/0-decoder-0.svg" "$out/translator_decoder.svg"
    cp "$tmp/att/0-encoder-0.svg" "$out/translator_encoder.svg"
    # the post-norm model, whose layer-0 softmax saturates, and QK-norm on it
    for v in post_norm qk_norm; do
        flags=(--post-norm)
        [ "$v" = qk_norm ] && flags+=(--qk-norm)
        "$B/translate" train --data "$tmp/train.tsv" --test "$tmp/test.tsv" --out "$tmp/$v.safetensors" \
            --seed 0 --threads 1 "${flags[@]}" --entropy-plot "$out/entropy_$v.svg" --quiet
    done
    "$B/translate" run --model "$tmp/post_norm.safetensors" --attention "$tmp/att_post" "i lost ." > /dev/null
    cp "$tmp/att_post/0-encoder-0.svg" "$out/translator_encoder_post_norm.svg"
fi
