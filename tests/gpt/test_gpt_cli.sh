#!/usr/bin/env bash
# tests/gpt/test_gpt_cli.sh BUILD_DIR: the gpt example end to end.
#
#   - bad flags (unknown, missing value, out of range, not a number, a
#     missing required flag, hidden not a multiple of heads) give the usage
#     text and exit status 2, and write no model;
#   - a short train / eval / sample round trip works: the loss falls, eval
#     gives the held-out loss train printed, --json and --plot are written;
#   - sample with the same seed gives the same text, another seed other text,
#     temperature 0 ignores the seed;
#   - --resume: 12 steps, then 12 more from the checkpoint, give the same
#     checkpoint, byte for byte, as 24 steps in one run;
#   - bad files (a missing model, a translator checkpoint, a text file, a
#     prompt or data with characters the model lacks) are exit 1 with a
#     message naming the problem.
# Prints 'N passed, N failed' as its last line; exits 1 on any failure.
set -u
B=${1:-build}
G=$B/gpt
if [ ! -x "$G" ]; then
    echo "test_gpt_cli: $G not found (make $G first)"
    echo "0 passed, 1 failed"
    exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
no() { fail=$((fail + 1)); echo "FAIL $1"; }

# run NAME WANT_STATUS WANT_TEXT ARGS...: exit status, and WANT_TEXT (fixed
# string, '' for none) in stderr.  A status above 128 is a crash.
run() {
    local name=$1 want=$2 text=$3
    shift 3
    timeout 120 "$G" "$@" < /dev/null > "$tmp/out" 2> "$tmp/err"
    local got=$?
    if [ "$got" != "$want" ]; then
        no "$name: exit $got, want $want ($(head -c 300 "$tmp/err"))"
    elif [ -n "$text" ] && ! grep -qF -- "$text" "$tmp/err"; then
        no "$name: '$text' not in stderr: $(head -c 300 "$tmp/err")"
    else
        ok
    fi
}

head -n 400 examples/data/eng-fra.tsv > "$tmp/data.tsv"
small=(--context 8 --hidden 16 --heads 2 --ffn 32 --layers 2 --batch 8)

# ---- usage: exit 2, the usage text, no model ---------------------------------
usage() { # usage NAME ARGS...
    local name=$1
    shift
    run "$name" 2 "usage:" "$@"
    if [ -e "$tmp/never.safetensors" ]; then no "$name: a model was written"; rm -f "$tmp/never.safetensors"; fi
}
train=(train --data "$tmp/data.tsv" --out "$tmp/never.safetensors" "${small[@]}" --steps 2)
usage "no command" ""
usage "unknown command" fly
usage "unknown flag" "${train[@]}" --wings 2
usage "flag without value" "${train[@]}" --lr
usage "zero steps" "${train[@]}" --steps 0
usage "negative batch" "${train[@]}" --batch -1
usage "batch not a number" "${train[@]}" --batch lots
usage "lr 0" "${train[@]}" --lr 0
usage "lr nan" "${train[@]}" --lr nan
usage "bad activation" "${train[@]}" --activation swish
usage "hidden not a multiple of heads" "${train[@]}" --hidden 10 --heads 4
usage "train without --out" train --data "$tmp/data.tsv"
usage "eval without --data" eval --model "$tmp/never.safetensors"
usage "sample without --model" sample
usage "negative temperature" sample --model x --temperature -1
usage "top-k out of range" sample --model x --top-k 1000
usage "stray argument" sample --model x hello
run "help" 0 "" --help

# ---- train, eval, sample ---------------------------------------------------------
run "train" 0 "" train --data "$tmp/data.tsv" --out "$tmp/m.safetensors" "${small[@]}" --steps 60 --eval-every 20 \
    --json "$tmp/train.json" --plot "$tmp/loss.svg"
cp "$tmp/out" "$tmp/train.out"
if [ -s "$tmp/loss.svg" ] && grep -q "<svg" "$tmp/loss.svg"; then ok; else no "train --plot wrote no SVG"; fi
# the final "val_loss" comes first, then the history's, oldest first
first=$(grep -o '"val_loss": [0-9.]*' "$tmp/train.json" | sed -n 2p | cut -d' ' -f2)
last=$(grep -o '"val_loss": [0-9.]*' "$tmp/train.json" | tail -n 1 | cut -d' ' -f2)
if [ -n "$first" ] && awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }'; then ok; else
    no "held-out loss did not fall: $first -> $last"; fi
run "eval" 0 "" eval --model "$tmp/m.safetensors" --data "$tmp/data.tsv" --json "$tmp/eval.json"
eval_loss=$(grep -o '"loss": [0-9.]*' "$tmp/eval.json" | cut -d' ' -f2)
if [ -n "$eval_loss" ] && [ "$(printf %.4f "$eval_loss")" = "$(printf %.4f "$last")" ]; then ok; else
    no "eval's loss $eval_loss is not train's last held-out loss $last"; fi
run "eval --all" 0 "" eval --model "$tmp/m.safetensors" --data "$tmp/data.tsv" --all
run "sample" 0 "" sample --model "$tmp/m.safetensors" --prompt "I " --length 80 --seed 5
cp "$tmp/out" "$tmp/s5a"
if [ "$(head -c 2 "$tmp/s5a")" = "I " ] && [ "$(wc -c < "$tmp/s5a")" -ge 82 ]; then ok; else
    no "sample does not start with the prompt or is short: $(head -c 100 "$tmp/s5a")"; fi
run "sample again" 0 "" sample --model "$tmp/m.safetensors" --prompt "I " --length 80 --seed 5
if cmp -s "$tmp/s5a" "$tmp/out"; then ok; else no "the same seed gave other text"; fi
run "another seed" 0 "" sample --model "$tmp/m.safetensors" --prompt "I " --length 80 --seed 6
if ! cmp -s "$tmp/s5a" "$tmp/out"; then ok; else no "seeds 5 and 6 gave the same text"; fi
run "greedy" 0 "" sample --model "$tmp/m.safetensors" --length 40 --temperature 0 --seed 1
cp "$tmp/out" "$tmp/g1"
run "greedy, another seed" 0 "" sample --model "$tmp/m.safetensors" --length 40 --temperature 0 --seed 2
if cmp -s "$tmp/g1" "$tmp/out"; then ok; else no "temperature 0 depends on the seed"; fi
run "top-k 1 is greedy" 0 "" sample --model "$tmp/m.safetensors" --length 40 --top-k 1 --seed 3
if cmp -s "$tmp/g1" "$tmp/out"; then ok; else no "top-k 1 differs from greedy"; fi

# ---- resume: 12 + 12 steps = 24 steps, byte for byte ------------------------------
run "24 steps" 0 "" train --data "$tmp/data.tsv" --out "$tmp/r24.safetensors" "${small[@]}" --steps 24 --quiet
run "12 steps" 0 "" train --data "$tmp/data.tsv" --out "$tmp/r12.safetensors" "${small[@]}" --steps 12 --quiet
run "12 more" 0 "" train --data "$tmp/data.tsv" --out "$tmp/r12b.safetensors" --resume "$tmp/r12.safetensors" \
    --steps 24 --batch 8 --quiet
if cmp -s "$tmp/r24.safetensors" "$tmp/r12b.safetensors"; then ok; else no "resumed run differs from one run"; fi

# ---- bad files: exit 1 and a message --------------------------------------------
printf 'not a model\n' > "$tmp/text.safetensors"
run "missing model" 1 "missing.safetensors" sample --model "$tmp/missing.safetensors"
run "text file as model" 1 "text.safetensors" eval --model "$tmp/text.safetensors" --data "$tmp/data.tsv"
run "translator model" 1 "not a gpt model" sample --model tests/reference/tiny_model.safetensors
run "missing data" 1 "nope.tsv" train --data "$tmp/nope.tsv" --out "$tmp/never.safetensors" --steps 1
run "prompt outside the vocabulary" 1 "not in the model's vocabulary" sample --model "$tmp/m.safetensors" \
    --prompt "~~~"
printf 'zzz {{{ ~~~ |||\n' > "$tmp/other.txt"
run "data outside the vocabulary" 1 "not in the model's vocabulary" eval --model "$tmp/m.safetensors" \
    --data "$tmp/other.txt" --all
run "resume on other text" 1 "other characters" train --data "$tmp/other.txt" --out "$tmp/never.safetensors" \
    --resume "$tmp/m.safetensors" --steps 100
printf 'a' > "$tmp/one.txt"
run "one character of text" 1 "at least 2" train --data "$tmp/one.txt" --out "$tmp/never.safetensors"
if [ -e "$tmp/never.safetensors" ]; then no "a failed run wrote a model"; else ok; fi

echo "gpt: $pass passed, $fail failed"
[ "$fail" = 0 ]
