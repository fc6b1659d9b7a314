#!/usr/bin/env bash
# tests/gpt/test_gpt_cli.sh BUILD_DIR: the gpt example end to end.
#
#   - bad flags (unknown, missing value, out of range, not a number, a
#     missing required flag, hidden not a multiple of heads) give the usage
#     text and exit status 2, and write no model;
#   - a short train / eval / sample round trip works: the loss falls, eval
#     gives the held-out loss train printed, --json and --plot are written;
#   - sample with the same seed gives the same text, another seed other text,
#     temperature 0 ignores the seed; --top-p: hostile values are exit 2
#     naming the flag, 1 changes no character, 1e-9 is greedy; --show-dist;
#     --json's first-character distributions, before and after the filters,
#     against PyTorch (tests/reference/sampling_gpt.txt);
#   - sample --head-off: a value outside the model or of another kind is
#     exit 2 naming it; a head switched off is listed in --json's
#     "heads_off" and changes the next characters' log-sum-exp;
#   - --resume: 12 steps, then 12 more from the checkpoint, give the same
#     checkpoint, byte for byte, as 24 steps in one run;
#   - --parts 2 (the batch on two threads): the same file every run and
#     when resumed, other bits than one part, and a held-out loss within
#     1e-3 of one part's;
#   - SIGINT / SIGTERM during training: exit 130 / 143, a checkpoint at
#     --out, and --resume from it gives the uninterrupted run's model, byte
#     for byte, and its logged losses;
#   - bad files (a missing model, a translator checkpoint, a text file, a
#     prompt or data with characters the model lacks) are exit 1 with a
#     message naming the problem;
#   - inputs from pipes (--data <(cat), --model <(cat), --resume <(cat), -
#     for stdin) give the same model and text as the files; a truncated
#     stream is exit 1 naming it; a FIFO with no writer is empty at once.
# Prints 'N passed, N failed' as its last line; exits 1 on any failure.
set -u
B=${1:-build}
G=$B/gpt
BIN=$G TIMEOUT=120
. "$(dirname "$0")/../lib.sh" # tmp, ok, no, run, usage, stop_when, finish

head -n 400 examples/data/eng-fra.tsv > "$tmp/data.tsv"
small=(--context 8 --hidden 16 --heads 2 --ffn 32 --layers 2 --batch 8)

# ---- usage: exit 2, the usage text, no model ---------------------------------
train=(train --data "$tmp/data.tsv" --out "$tmp/never.safetensors" "${small[@]}" --steps 2)
usage "no command" ""
usage "unknown command" fly
usage "unknown flag" "${train[@]}" --wings 2
usage "bad precision" "${train[@]}" --precision fp16
usage "flag without value" "${train[@]}" --lr
usage "zero steps" "${train[@]}" --steps 0
usage "negative batch" "${train[@]}" --batch -1
usage "batch not a number" "${train[@]}" --batch lots
usage "lr 0" "${train[@]}" --lr 0
usage "lr nan" "${train[@]}" --lr nan
usage "bad activation" "${train[@]}" --activation swish
usage "zero parts" "${train[@]}" --parts 0
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

# ---- --top-p: checked, 1 changes nothing, a tiny one is greedy, --show-dist ---------
for v in abc 1e999 -1 nan 0 1.5 ""; do
    run "--top-p '$v'" 2 "--top-p needs a number p with 0 < p <= 1, got '$v'" sample --model "$tmp/m.safetensors" --top-p "$v"
done
run "top-p 1" 0 "" sample --model "$tmp/m.safetensors" --prompt "I " --length 80 --seed 5 --top-p 1
if cmp -s "$tmp/s5a" "$tmp/out"; then ok; else no "--top-p 1 changed the text of seed 5"; fi
run "top-p 1e-9 is greedy" 0 "" sample --model "$tmp/m.safetensors" --length 40 --top-p 1e-9 --seed 3
if cmp -s "$tmp/g1" "$tmp/out"; then ok; else no "top-p 1e-9 differs from greedy"; fi
run "--show-dist" 0 "" sample --model "$tmp/m.safetensors" --prompt "I " --length 5 --top-p 0.5 --temperature 0.8 --show-dist 4
# at temperature 0.8, cut and renormalised, the most probable character gains
if grep -q "temperature 0.8, top-k 0, top-p 0.5 keep [0-9]* of [0-9]*" "$tmp/out" &&
    [ "$(grep -c '^[^ ]* *0\.[0-9]* *0\.[0-9]*' "$tmp/out")" = 4 ] &&
    awk 'NR == 3 { good = $3 + 0 > $2 + 0 } END { exit !good }' "$tmp/out"; then ok
else no "--show-dist 4: $(head -c 300 "$tmp/out")"; fi

# ---- the first character's distributions against PyTorch (tests/reference/sampling_gpt.txt:
# gpt.py's twin of gpt_tiny in float64; this float build within a relative 1e-4, the
# characters filtered out the same) --------------------------------------------------
fixture=tests/reference/sampling_gpt.txt
while read -r tag hex t k p; do
    [ "$tag" = gpt ] || continue
    prompt=$(printf "$(echo "$hex" | sed 's/../\\x&/g')")
    read -r _ before; read -r _ after
    if ! "$G" sample --model tests/reference/gpt_tiny.safetensors --prompt "$prompt" --length 1 --temperature "$t" \
        --top-k "$k" --top-p "$p" --json - > "$tmp/dist.json" 2> "$tmp/err"; then no "gpt sample $t $k $p: $(cat "$tmp/err")"; continue; fi
    for which in before after; do
        want=$([ $which = before ] && echo "$before" || echo "$after")
        got=$(grep -o "\"$which\": \[[^]]*\]" "$tmp/dist.json" | sed 's/.*\[//; s/\]//; s/,//g')
        if awk -v got="$got" -v want="$want" 'BEGIN { n = split(got, g, " "); m = split(want, w, " ");
                if (n != m || n < 2) exit 1
                for (i = 1; i <= n; i++) { d = g[i] - w[i]; if (d < 0) d = -d
                    if ((g[i] == 0) != (w[i] == 0) || d > 1e-4 * w[i]) exit 1 } }'; then ok
        else no "gpt sample --prompt '$prompt' --temperature $t --top-k $k --top-p $p: \"$which\" is not PyTorch's"; fi
    done
done < "$fixture"

# ---- --head-off: checked against the model; a head off changes the numbers ---------
for v in self:2:0 self:0:2 self:-1:0 cross:0:0 self:0 self:0:0x; do
    run "--head-off $v" 2 "--head-off wants self:LAYER:HEAD with LAYER in 0..1 and HEAD in 0..1, got '$v'" \
        sample --model "$tmp/m.safetensors" --length 5 --head-off "$v"
done
run "--head-off on train" 2 "--head-off is a flag of sample only" "${train[@]}" --head-off self:0:0
sample=(sample --model "$tmp/m.safetensors" --prompt "I " --length 20 --seed 5)
run "every head on" 0 "" "${sample[@]}" --json "$tmp/on.json"
run "a head off" 0 "" "${sample[@]}" --head-off self:1:0 --json "$tmp/off.json"
if grep -qF '"heads_off": [], ' "$tmp/on.json" && grep -qF '"heads_off": ["self:1:0"], ' "$tmp/off.json"; then ok
else no "--json does not list the heads off: $(grep -o '"heads_off": [^]]*]' "$tmp/on.json" "$tmp/off.json")"; fi
lse_on=$(grep -o '"lse": \[[^]]*\]' "$tmp/on.json") lse_off=$(grep -o '"lse": \[[^]]*\]' "$tmp/off.json")
if [ -n "$lse_on" ] && [ -n "$lse_off" ] && [ "$lse_on" != "$lse_off" ]; then ok
else no "switching head 1:0 off left the log-sum-exp as it was: ${lse_off:0:80}"; fi

# ---- resume: 12 + 12 steps = 24 steps, byte for byte ------------------------------
run "24 steps" 0 "" train --data "$tmp/data.tsv" --out "$tmp/r24.safetensors" "${small[@]}" --steps 24 --quiet
run "12 steps" 0 "" train --data "$tmp/data.tsv" --out "$tmp/r12.safetensors" "${small[@]}" --steps 12 --quiet
run "12 more" 0 "" train --data "$tmp/data.tsv" --out "$tmp/r12b.safetensors" --resume "$tmp/r12.safetensors" \
    --steps 24 --batch 8 --quiet
if cmp -s "$tmp/r24.safetensors" "$tmp/r12b.safetensors"; then ok; else no "resumed run differs from one run"; fi

# ---- --parts: the batch in parts on threads, the same bits every run, and
# resumed; other roundings than one part, and close to its model ---------------
run "2 parts" 0 "" train --data "$tmp/data.tsv" --out "$tmp/p2.safetensors" "${small[@]}" --steps 24 --quiet --parts 2
run "2 parts again" 0 "" train --data "$tmp/data.tsv" --out "$tmp/p2b.safetensors" "${small[@]}" --steps 12 --quiet \
    --parts 2
run "2 parts resumed" 0 "" train --data "$tmp/data.tsv" --out "$tmp/p2c.safetensors" --resume "$tmp/p2b.safetensors" \
    --steps 24 --batch 8 --quiet --parts 2
if cmp -s "$tmp/p2.safetensors" "$tmp/p2c.safetensors"; then ok; else no "--parts 2 resumed differs from one run"; fi
if ! cmp -s "$tmp/p2.safetensors" "$tmp/r24.safetensors"; then ok; else no "--parts 2 wrote the bits of one part"; fi
run "eval of 2 parts" 0 "" eval --model "$tmp/p2.safetensors" --data "$tmp/data.tsv"
p2=$(grep -o 'loss [0-9.]*' "$tmp/out" | head -n 1)
run "eval of 1 part" 0 "" eval --model "$tmp/r24.safetensors" --data "$tmp/data.tsv"
p1=$(grep -o 'loss [0-9.]*' "$tmp/out" | head -n 1)
if [ -n "$p1" ] && [ -n "$p2" ] && awk -v a="${p1#loss }" -v b="${p2#loss }" 'BEGIN { d = a - b; exit !(d < 1e-3 && d > -1e-3) }'
then ok; else no "--parts 2 and one part score '$p2' and '$p1'"; fi

# ---- a signal during training: the step ends, a checkpoint at --out, exit
# 128 + signal; resumed, it ends with the model (and the logged losses) of an
# uninterrupted run.  The signal goes once the first evaluation is logged, so
# the loop is running whatever the machine's load; SIGTERM's run uses two
# threads.  Both continuations stop 30 steps after the step it stopped at.
for sig in INT TERM; do
    want=130 more=()
    [ "$sig" = TERM ] && want=143 more=(--threads 2)
    long=(--data "$tmp/data.tsv" "${small[@]}" --eval-every 10 --dropout 0.1 "${more[@]}")
    stop_when "$sig" "step    10" "$tmp/k_$sig.log" train "${long[@]}" --out "$tmp/k_$sig.safetensors" --steps 10000000
    n=$(grep -o 'stopped after step [0-9]*' "$tmp/k_$sig.log" | awk '{print $NF}')
    if [ "$stopped_rc" = "$want" ] && [ -n "$n" ] && [ -s "$tmp/k_$sig.safetensors" ]; then ok; else
        no "SIG$sig: exit $stopped_rc (want $want): $(tail -n 2 "$tmp/k_$sig.log")"
        continue
    fi
    end=$((n + 30))
    run "SIG$sig resumed" 0 "" train "${long[@]}" --resume "$tmp/k_$sig.safetensors" --out "$tmp/kr_$sig.safetensors" \
        --steps "$end"
    grep '^step' "$tmp/out" | cut -c1-60 > "$tmp/kr_$sig.log"
    run "SIG$sig straight" 0 "" train "${long[@]}" --out "$tmp/ks_$sig.safetensors" --steps "$end"
    grep '^step' "$tmp/out" | cut -c1-60 | tail -n "$(wc -l < "$tmp/kr_$sig.log")" > "$tmp/ks_$sig.log"
    if cmp -s "$tmp/ks_$sig.safetensors" "$tmp/kr_$sig.safetensors"; then ok; else
        no "SIG$sig: stopped at step $n and resumed to $end differs from $end steps straight"; fi
    if [ -s "$tmp/kr_$sig.log" ] && cmp -s "$tmp/ks_$sig.log" "$tmp/kr_$sig.log"; then ok; else
        no "SIG$sig: the resumed run logged other losses: $(diff "$tmp/ks_$sig.log" "$tmp/kr_$sig.log" | head -n 4)"; fi
done
run "an interrupted checkpoint samples" 0 "" sample --model "$tmp/k_INT.safetensors" --length 10

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

# files that are not regular: a FIFO with no writer as --data is an empty
# stream at once (a blocking open would end in the timeout), and --json
# never replaces one
mkfifo "$tmp/in.fifo" "$tmp/out.fifo"
run "a FIFO with no writer as --data" 1 "in.fifo: 0 characters of text" train --data "$tmp/in.fifo" \
    --out "$tmp/never.safetensors"
run "--json into a FIFO" 1 "not a regular file" eval --model "$tmp/m.safetensors" --data "$tmp/data.tsv" \
    --json "$tmp/out.fifo"
if [ -p "$tmp/out.fifo" ]; then ok; else no "--json replaced the FIFO at its path"; fi

# ---- inputs from pipes: read to the end, checked as files --------------------
cut -f1 "$tmp/data.tsv" > "$tmp/data.txt" # not .tsv: a pipe's name says nothing of its columns
pipe=(--out "$tmp/p1.safetensors" "${small[@]}" --steps 3 --quiet)
run "train from a file" 0 "" train --data "$tmp/data.txt" "${pipe[@]}"
pipe[1]="$tmp/p2.safetensors"
run "train --data <(cat)" 0 "" train --data <(cat "$tmp/data.txt") "${pipe[@]}"
if cmp -s "$tmp/p1.safetensors" "$tmp/p2.safetensors"; then ok; else no "a piped --data trained another model"; fi
pipe[1]="$tmp/p3.safetensors"
timeout 120 "$G" train --data - "${pipe[@]}" < "$tmp/data.txt" > "$tmp/out" 2> "$tmp/err"
if [ $? = 0 ] && cmp -s "$tmp/p1.safetensors" "$tmp/p3.safetensors"; then ok
else no "train --data - (stdin): $(head -c 300 "$tmp/err")"; fi
run "sample from a file" 0 "" sample --model "$tmp/p1.safetensors" --length 20 --seed 3
cp "$tmp/out" "$tmp/sample_file.txt"
run "sample --model <(cat)" 0 "" sample --model <(cat "$tmp/p1.safetensors") --length 20 --seed 3
if cmp -s "$tmp/out" "$tmp/sample_file.txt"; then ok; else no "sample --model <(cat) drew other text"; fi
run "train --resume <(cat)" 0 "" train --data "$tmp/data.txt" --out "$tmp/p4.safetensors" \
    --resume <(cat "$tmp/p1.safetensors") "${small[@]}" --steps 6 --quiet
run "sample --model: a truncated stream" 1 "/dev/fd/" sample --model <(head -c 500 "$tmp/p1.safetensors")
usage "two inputs from stdin" train --data - --resume - --out "$tmp/never.safetensors"
AG_INPUT_LIMIT=100 run "--data over the input limit" 1 "more than the input limit of 100 bytes" \
    train --data <(cat "$tmp/data.txt") --out "$tmp/never.safetensors" "${small[@]}"
[ -e "$tmp/never.safetensors" ] && no "a refused input led to a written model"

finish gpt
