#!/usr/bin/env bash
# tests/translate/test_translate.sh BUILD_DIR: the translator end to end.
#   - training on a tiny file makes the loss fall;
#   - a checkpoint loads back (run and eval work on it, the same outputs twice);
#   - 2 epochs + --resume to 4 epochs equals 4 epochs straight, bit for bit;
#   - the same seed gives the same losses, run after run, with --threads 2 too;
#   - SIGINT / SIGTERM during training: exit 130 / 143, a checkpoint at --out,
#     and --resume from it gives the uninterrupted run's model, bit for bit;
#   - split is a deterministic partition by distinct source (the twin's bytes);
#     train --test and make run print both scores; --init d2l draws the
#     twin's init; --pre-norm and --qk-norm survive a checkpoint;
#   - train's default is pre-norm, --post-norm the model of before: its file
#     and an older one have no norm key, load as post-norm, and --resume
#     without a norm flag continues them as post-norm, bit for bit.
# Prints 'N passed, N failed' last; exits 1 on any failure.
set -u
B=${1:-build}
T=$B/translate
SANITIZED=${SANITIZED:-0} # 1: an ASan + UBSan build (UBSan exits 87)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
no() { fail=$((fail + 1)); echo "FAIL $1"; }
. "$(dirname "$0")/../bg.sh" # start_bg, wait_bounded

head -n 120 examples/data/eng-fra.tsv > "$tmp/tiny.tsv"
small=(--hidden 16 --heads 2 --ffn 32 --layers 1 --batch 16 --seed 3)

# 1. the loss falls over a few dozen steps (8 epochs x 8 batches)
if "$T" train --data "$tmp/tiny.tsv" --out "$tmp/a.safetensors" --epochs 8 "${small[@]}" > "$tmp/a.log" 2>&1; then
    first=$(grep -m1 '^epoch 1/' "$tmp/a.log" | awk '{print $4}')
    last=$(grep '^epoch 8/' "$tmp/a.log" | awk '{print $4}')
    if awk -v f="$first" -v l="$last" 'BEGIN { exit !(l < 0.8 * f) }'; then ok "loss falls: $first -> $last"
    else no "loss did not fall enough: $first -> $last"; fi
else
    no "train failed: $(tail -n 3 "$tmp/a.log")"
fi

# 2. the checkpoint loads back and decodes the same way twice
if "$T" run --model "$tmp/a.safetensors" "go ." "i lost ." > "$tmp/r1.txt" 2>&1 &&
   "$T" run --model "$tmp/a.safetensors" "go ." "i lost ." > "$tmp/r2.txt" 2>&1 &&
   [ "$(wc -l < "$tmp/r1.txt")" = 2 ] && cmp -s "$tmp/r1.txt" "$tmp/r2.txt"; then ok "run: one line per sentence, repeatable"
else no "run on a saved model: $(cat "$tmp/r1.txt")"; fi
if printf 'go .\ni lost .\n' | "$T" run --model "$tmp/a.safetensors" > "$tmp/r3.txt" 2>&1 && cmp -s "$tmp/r1.txt" "$tmp/r3.txt"
then ok "run reads stdin lines"; else no "run from stdin differs: $(cat "$tmp/r3.txt")"; fi
# run --attention: the decoder's pictures cross out the causal mask's cells
# (above the diagonal), the encoder's (one sentence, no padding) none
if "$T" run --model "$tmp/a.safetensors" --attention "$tmp/att" "i lost ." > /dev/null 2>&1 &&
   [ "$(grep -c 'class="cell masked"' "$tmp/att/0-decoder-0.svg")" -gt 0 ] &&
   [ "$(grep -c 'class="cell masked"' "$tmp/att/0-encoder-0.svg")" = 0 ]
then ok "run --attention: the decoder's masked cells are drawn masked"
else no "run --attention: masked cells in $(ls "$tmp/att" 2>&1)"; fi
if "$T" eval --model "$tmp/a.safetensors" --data "$tmp/tiny.tsv" --json "$tmp/e.json" > "$tmp/e.log" 2>&1 &&
   grep -q '"sources": [0-9]*, "exact_match": [0-9.]*, "bleu": [0-9.]*, "ceiling": [0-9.]*' "$tmp/e.json"
then ok "eval writes its json ($(cat "$tmp/e.json"))"; else no "eval: $(cat "$tmp/e.log")"; fi

# 3. resume: 2 + 2 epochs == 4 epochs, bit for bit (with dropout on).  A
# decaying learning-rate schedule depends on the planned number of epochs,
# so this uses a constant rate (warmup 0), the same in every run.
flat=(--schedule constant --warmup 0)
"$T" train --data "$tmp/tiny.tsv" --out "$tmp/s4.safetensors" --epochs 4 "${small[@]}" "${flat[@]}" > "$tmp/s4.log" 2>&1
"$T" train --data "$tmp/tiny.tsv" --out "$tmp/s2.safetensors" --epochs 2 "${small[@]}" "${flat[@]}" > "$tmp/s2.log" 2>&1
"$T" train --data "$tmp/tiny.tsv" --resume "$tmp/s2.safetensors" --out "$tmp/r4.safetensors" --epochs 4 \
    "${small[@]}" "${flat[@]}" > "$tmp/r4.log" 2>&1
if [ -s "$tmp/s4.safetensors" ] && cmp -s "$tmp/s4.safetensors" "$tmp/r4.safetensors"; then
    ok "2 epochs + resume to 4 == 4 epochs straight (identical files)"
else
    no "resume differs from a straight run: $(tail -n 2 "$tmp/r4.log")"
fi
l4=$(grep '^epoch 4/' "$tmp/s4.log" | awk '{print $4}')
r4=$(grep '^epoch 4/' "$tmp/r4.log" | awk '{print $4}')
if [ -n "$l4" ] && [ "$l4" = "$r4" ]; then ok "epoch 4 loss equal: $l4"; else no "epoch 4 loss $l4 vs resumed $r4"; fi

# 3b. with the default schedule, the same plan resumed gives the same model:
# 4 planned epochs stopped after 2 (--stop-after) then resumed to 4.
"$T" train --data "$tmp/tiny.tsv" --out "$tmp/c4.safetensors" --epochs 4 "${small[@]}" > /dev/null 2>&1
"$T" train --data "$tmp/tiny.tsv" --out "$tmp/c2.safetensors" --epochs 4 --stop-after 2 "${small[@]}" > /dev/null 2>&1
"$T" train --data "$tmp/tiny.tsv" --resume "$tmp/c2.safetensors" --out "$tmp/cr.safetensors" --epochs 4 \
    "${small[@]}" > /dev/null 2>&1
if [ -s "$tmp/c4.safetensors" ] && cmp -s "$tmp/c4.safetensors" "$tmp/cr.safetensors"; then
    ok "cosine schedule: stop after 2 of 4, resume == straight"
else no "cosine schedule resume differs"; fi

# 4. the same seed gives the same numbers
"$T" train --data "$tmp/tiny.tsv" --out "$tmp/b.safetensors" --epochs 8 "${small[@]}" > "$tmp/b.log" 2>&1
if diff <(grep '^epoch' "$tmp/a.log" | awk '{print $2, $4}') <(grep '^epoch' "$tmp/b.log" | awk '{print $2, $4}') > /dev/null &&
   cmp -s "$tmp/a.safetensors" "$tmp/b.safetensors"; then ok "same seed, same losses and weights"
else no "two runs with seed 3 differ"; fi

# 4b. --threads 2 splits each batch between two workers (src/core/team.c):
# its own numbers, the same run after run, resumed bit for bit too (the
# second worker's dropout stream is drawn from the saved one), and close to
# one thread's (another split of the sums, other dropout masks)
"$T" train --data "$tmp/tiny.tsv" --out "$tmp/t4.safetensors" --epochs 4 --threads 2 "${small[@]}" "${flat[@]}" > "$tmp/t4.log" 2>&1
"$T" train --data "$tmp/tiny.tsv" --out "$tmp/t4b.safetensors" --epochs 4 --threads 2 "${small[@]}" "${flat[@]}" > /dev/null 2>&1
"$T" train --data "$tmp/tiny.tsv" --out "$tmp/t2.safetensors" --epochs 2 --threads 2 "${small[@]}" "${flat[@]}" > /dev/null 2>&1
"$T" train --data "$tmp/tiny.tsv" --resume "$tmp/t2.safetensors" --out "$tmp/tr.safetensors" --epochs 4 --threads 2 \
    "${small[@]}" "${flat[@]}" > /dev/null 2>&1
if [ -s "$tmp/t4.safetensors" ] && cmp -s "$tmp/t4.safetensors" "$tmp/t4b.safetensors"; then
    ok "--threads 2: same seed, same weights"
else no "--threads 2: two runs differ: $(tail -n 2 "$tmp/t4.log")"; fi
if [ -s "$tmp/tr.safetensors" ] && cmp -s "$tmp/t4.safetensors" "$tmp/tr.safetensors"; then
    ok "--threads 2: 2 epochs + resume to 4 == 4 epochs straight"
else no "--threads 2: resume differs from a straight run"; fi
t4=$(grep '^epoch 4/' "$tmp/t4.log" | awk '{print $4}')
if [ -n "$t4" ] && awk -v a="$t4" -v b="$l4" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d < 0.1 * b) }'; then
    ok "--threads 2: epoch 4 loss $t4, one thread's $l4"
else no "--threads 2: epoch 4 loss $t4 far from one thread's $l4"; fi

# 5. adam trains and resumes too
"$T" train --data "$tmp/tiny.tsv" --out "$tmp/d4.safetensors" --epochs 2 --optimizer adam --lr 0.003 "${small[@]}" \
    "${flat[@]}" > /dev/null 2>&1
"$T" train --data "$tmp/tiny.tsv" --out "$tmp/d2.safetensors" --epochs 1 --optimizer adam --lr 0.003 "${small[@]}" \
    "${flat[@]}" > /dev/null 2>&1
"$T" train --data "$tmp/tiny.tsv" --resume "$tmp/d2.safetensors" --out "$tmp/dr.safetensors" --epochs 2 --optimizer adam \
    --lr 0.003 "${small[@]}" "${flat[@]}" > /dev/null 2>&1
if [ -s "$tmp/d4.safetensors" ] && cmp -s "$tmp/d4.safetensors" "$tmp/dr.safetensors"; then ok "adam: resume == straight"
else no "adam resume differs"; fi

# 6. a signal during training: the step ends, the checkpoint goes to --out,
# exit 128 + signal; resumed, the run ends with the model an uninterrupted
# run makes.  The signal is sent once the first epoch is logged (the loop is
# running), so it lands inside a later epoch, whatever the machine's load;
# both runs then stop at the end of the epoch after the one it stopped in.
# SIGTERM's run uses two threads.
head -n 1500 examples/data/eng-fra.tsv > "$tmp/sig.tsv"
for sig in INT TERM; do
    want=130 more=()
    [ "$sig" = TERM ] && want=143 more=(--threads 2)
    start_bg "$tmp/k_$sig.log" "$T" train --data "$tmp/sig.tsv" --out "$tmp/k_$sig.safetensors" --epochs 400 \
        "${small[@]}" "${more[@]}"
    pid=$bg_pid
    for _ in $(seq 1200); do
        grep -q '^epoch 1/' "$tmp/k_$sig.log" && break
        kill -0 "$pid" 2> /dev/null || break
        sleep 0.05
    done
    kill -"$sig" "$pid"
    wait_bounded "$pid" 120
    rc=$?
    n=$(grep -o 'stopped \(in\|after\) epoch [0-9]*' "$tmp/k_$sig.log" | awk '{print $NF}')
    if [ "$rc" = "$want" ] && [ -n "$n" ] && [ -s "$tmp/k_$sig.safetensors" ]; then
        ok "SIG$sig: exit $rc, $(grep -o 'stopped.*pairs\|stopped after epoch [0-9]*' "$tmp/k_$sig.log")"
    else
        no "SIG$sig: exit $rc (want $want): $(tail -n 2 "$tmp/k_$sig.log")"
        continue
    fi
    stop=$((n + 1))
    "$T" train --data "$tmp/sig.tsv" --resume "$tmp/k_$sig.safetensors" --out "$tmp/kr_$sig.safetensors" --epochs 400 \
        --stop-after "$stop" "${small[@]}" "${more[@]}" > "$tmp/kr_$sig.log" 2>&1
    "$T" train --data "$tmp/sig.tsv" --out "$tmp/ks_$sig.safetensors" --epochs 400 --stop-after "$stop" "${small[@]}" \
        "${more[@]}" > "$tmp/ks_$sig.log" 2>&1
    if [ -s "$tmp/ks_$sig.safetensors" ] && cmp -s "$tmp/ks_$sig.safetensors" "$tmp/kr_$sig.safetensors"; then
        ok "SIG$sig: resumed to epoch $stop == straight to epoch $stop (identical files)"
    else no "SIG$sig: resumed differs from straight: $(tail -n 2 "$tmp/kr_$sig.log")"; fi
    l1=$(grep "^epoch $stop/" "$tmp/ks_$sig.log" | awk '{print $4}')
    l2=$(grep "^epoch $stop/" "$tmp/kr_$sig.log" | awk '{print $4}')
    if [ -n "$l1" ] && [ "$l1" = "$l2" ]; then ok "SIG$sig: epoch $stop loss equal: $l1"
    else no "SIG$sig: epoch $stop loss $l1, resumed $l2"; fi
done
if "$T" run --model "$tmp/k_INT.safetensors" "go ." > /dev/null 2>&1; then ok "an interrupted checkpoint runs"
else no "run on an interrupted checkpoint failed"; fi

# 7. an error inside the epoch loop (a diverging run): exit 1, no model, and
# nothing leaked (under valgrind when it is installed; SANITIZED=1 says the
# binary is an ASan build, whose leak check is on)
div=("$T" train --data "$tmp/tiny.tsv" --out "$tmp/div.safetensors" --epochs 4 "${small[@]}" --lr 100 --clip 0
     --schedule constant --warmup 0)
if [ "$SANITIZED" != 1 ] && command -v valgrind > /dev/null; then
    div=(valgrind --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite -q "${div[@]}")
fi
"${div[@]}" > "$tmp/div.log" 2>&1
rc=$?
why=$(grep -o 'epoch [0-9]*.*\(gradient norm\|loss\) is [a-z-]*' "$tmp/div.log" | head -n 1)
if [ "$rc" = 1 ] && [ -n "$why" ] && [ ! -e "$tmp/div.safetensors" ]; then ok "a diverging run stops: $why"
elif [ "$SANITIZED" = 1 ] && [ "$rc" = 87 ] && grep -q 'src/core/elementwise.c.*runtime error' "$tmp/div.log"; then
    echo "skip a diverging run: UBSan stops it first in the library ($(grep -o 'elementwise.c.*' "$tmp/div.log" | head -n 1))"
else no "a diverging run: exit $rc, $(grep -v '^epoch' "$tmp/div.log" | head -n 12)"; fi

# 8. split: a partition of the usable lines by distinct source, the same
# run after run and the same bytes as the PyTorch twin's split; train with
# --test scores both parts; --init d2l draws the twin's distributions.
data=examples/data/eng-fra.tsv
"$T" split --data "$data" --train "$tmp/sp_a.tsv" --test "$tmp/sp_b.tsv" > "$tmp/sp.log" 2>&1
"$T" split --data "$data" --train "$tmp/sp_a2.tsv" --test "$tmp/sp_b2.tsv" > /dev/null 2>&1
if [ -s "$tmp/sp_a.tsv" ] && cmp -s "$tmp/sp_a.tsv" "$tmp/sp_a2.tsv" && cmp -s "$tmp/sp_b.tsv" "$tmp/sp_b2.tsv"; then
    ok "split: the same files twice ($(cat "$tmp/sp.log"))"
else no "split: two runs differ: $(cat "$tmp/sp.log")"; fi
# the shipped file has no bad line: the two parts are its lines, reordered
if diff <(sort "$data") <(sort "$tmp/sp_a.tsv" "$tmp/sp_b.tsv") > /dev/null; then ok "split: a partition of the lines"
else no "split: the parts are not the file's lines"; fi
# disjoint by source: the tokens of each source (the reader's preprocessing,
# as translate eval groups them) in one part only; eval --json counts the
# distinct sources of a file, so the parts' counts add up to the file's
src_count() { "$T" eval --model "$tmp/a.safetensors" --data "$1" --json "$tmp/count.json" > /dev/null 2>&1 &&
    grep -o '"sources": [0-9]*' "$tmp/count.json" | awk '{print $2}'; }
na=$(src_count "$tmp/sp_a.tsv") nb=$(src_count "$tmp/sp_b.tsv") nall=$(src_count "$data")
if [ -n "$na" ] && [ -n "$nb" ] && [ $((na + nb)) = "$nall" ] && [ $((nb * 10)) -le "$nall" ] &&
   [ $((nb * 10 + 10)) -gt "$nall" ]
then ok "split: $na + $nb distinct sources = $nall, a tenth held out"
else no "split: sources $na + $nb, file $nall"; fi
PY=/usr/bin/python3
if [ -x "$PY" ]; then
    "$PY" tests/reference/translator.py split --data "$data" --train "$tmp/py_a.tsv" --test "$tmp/py_b.tsv" > /dev/null 2>&1
    if cmp -s "$tmp/sp_a.tsv" "$tmp/py_a.tsv" && cmp -s "$tmp/sp_b.tsv" "$tmp/py_b.tsv"; then
        ok "split: the same bytes as translator.py split"
    else no "split differs from translator.py split"; fi
else echo "skip split against translator.py: no $PY"; fi
head -n 300 "$tmp/sp_a.tsv" > "$tmp/sp_train.tsv"
head -n 60 "$tmp/sp_b.tsv" > "$tmp/sp_test.tsv"
if "$T" train --data "$tmp/sp_train.tsv" --test "$tmp/sp_test.tsv" --out "$tmp/h.safetensors" --epochs 2 "${small[@]}" \
       --json "$tmp/h.json" > "$tmp/h.log" 2>&1 &&
   grep -q '^training data: sources [0-9]*  exact match [0-9.]*  BLEU [0-9.]*' "$tmp/h.log" &&
   grep -q '^held-out: *sources [0-9]*  exact match [0-9.]*  BLEU [0-9.]*' "$tmp/h.log" &&
   grep -q '"train_exact_match": [0-9.]*, "train_bleu": [0-9.]*' "$tmp/h.json"
then ok "train --test: training-data and held-out scores"; else no "train --test: $(tail -n 3 "$tmp/h.log")"; fi
# the probe: epochs 0 (before training), 1 and 2, each with 3 kinds x 1 layer
n_ep=$(grep -o '"epoch": [0-9]*, "layers"' "$tmp/h.json" | wc -l)
n_l=$(grep -o '"layer": "[a-z.]*[0-9]*", "entropy": [0-9.e+-]*, "max_score": [0-9.e+-]*' "$tmp/h.json" | wc -l)
if [ "$n_ep" = 3 ] && [ "$n_l" = 9 ]; then ok "train --json: attention statistics per epoch and layer"
else no "train --json: $n_ep probed epochs, $n_l layer entries (want 3, 9)"; fi
# measuring does not change the run: the same model without --json
"$T" train --data "$tmp/sp_train.tsv" --test "$tmp/sp_test.tsv" --out "$tmp/h0.safetensors" --epochs 2 "${small[@]}" \
    > /dev/null 2>&1
if [ -s "$tmp/h0.safetensors" ] && cmp -s "$tmp/h.safetensors" "$tmp/h0.safetensors"; then ok "the probe changes nothing"
else no "train --json wrote another model than train"; fi
"$T" train --data "$tmp/tiny.tsv" --out "$tmp/i.safetensors" --epochs 1 --lr 1e-12 --init d2l "${small[@]}" > /dev/null 2>&1
if [ -x "$PY" ] && "$PY" -c 'import torch' 2> /dev/null; then
    if "$PY" tests/reference/translator.py initcheck --model "$tmp/i.safetensors" --quiet > "$tmp/ic.log" 2>&1
    then ok "--init d2l: $(tail -n 1 "$tmp/ic.log")"; else no "--init d2l: $(tail -n 5 "$tmp/ic.log")"; fi
    # and the check can fail: the scaled init is not d2l's
    "$T" train --data "$tmp/tiny.tsv" --out "$tmp/i0.safetensors" --epochs 1 --lr 1e-12 "${small[@]}" > /dev/null 2>&1
    if ! "$PY" tests/reference/translator.py initcheck --model "$tmp/i0.safetensors" --init d2l --quiet > "$tmp/ic0.log" 2>&1 &&
       grep -q 'embedding.weight *BAD' "$tmp/ic0.log"
    then ok "initcheck tells the scaled init from d2l's"; else no "initcheck took the scaled init for d2l's"; fi
else echo "skip --init d2l against translator.py: no PyTorch under $PY"; fi

# 10. --pre-norm and --qk-norm: recorded in the checkpoint, which run, eval
# and --resume rebuild
if "$T" train --data "$tmp/tiny.tsv" --out "$tmp/c.safetensors" --epochs 2 --pre-norm --qk-norm "${small[@]}" \
       > "$tmp/c.log" 2>&1 && head -c 4096 "$tmp/c.safetensors" | grep -aq '"pre_norm":"1"' &&
   head -c 4096 "$tmp/c.safetensors" | grep -aq '"qk_norm":"1"' &&
   head -c 65536 "$tmp/c.safetensors" | grep -aq '"encoder.blocks.0.attention.q_norm.weight"' &&
   head -c 65536 "$tmp/c.safetensors" | grep -aq '"decoder.norm.bias"'
then ok "train --pre-norm --qk-norm: the checkpoint records both and has their parameters"
else no "train --pre-norm --qk-norm: $(tail -n 3 "$tmp/c.log")"; fi
if "$T" run --model "$tmp/c.safetensors" "go ." "i lost ." > "$tmp/c1.txt" 2>&1 && [ "$(wc -l < "$tmp/c1.txt")" = 2 ] &&
   "$T" eval --model "$tmp/c.safetensors" --data "$tmp/tiny.tsv" > "$tmp/c2.txt" 2>&1 &&
   "$T" train --data "$tmp/tiny.tsv" --resume "$tmp/c.safetensors" --out "$tmp/c3.safetensors" --epochs 3 \
       "${small[@]}" > "$tmp/c3.log" 2>&1 && head -c 4096 "$tmp/c3.safetensors" | grep -aq '"qk_norm":"1"'
then ok "run, eval and --resume rebuild the pre-norm, QK-norm model"
else no "the pre-norm, QK-norm checkpoint: $(tail -n 2 "$tmp/c1.txt" "$tmp/c2.txt" "$tmp/c3.log")"; fi
"$T" train --data "$tmp/tiny.tsv" --resume "$tmp/a.safetensors" --out "$tmp/c4.safetensors" --epochs 9 --qk-norm \
    "${small[@]}" > "$tmp/c4.log" 2>&1
rc=$?
if [ "$rc" = 2 ] && grep -q -- "--qk-norm 1 conflicts with --resume $tmp/a.safetensors, saved with qk_norm 0" "$tmp/c4.log"
then ok "--resume refuses --qk-norm for a model without it"; else no "--resume --qk-norm: exit $rc, $(tail -n 2 "$tmp/c4.log")"; fi
sed 's/"pre_norm":"1"/"pre_norm":"2"/' "$tmp/c.safetensors" > "$tmp/c5.safetensors"
"$T" run --model "$tmp/c5.safetensors" "go ." > "$tmp/c5.log" 2>&1
rc=$?
if [ "$rc" = 1 ] && grep -q "metadata 'pre_norm' is '2', want a whole number from 0 to 1" "$tmp/c5.log"
then ok "pre_norm 2 in the metadata is refused by name"; else no "pre_norm 2: exit $rc, $(cat "$tmp/c5.log")"; fi

# 11. the default is pre-norm (--pre-norm states it: the same file);
# --post-norm writes the file of before, with neither key, and a file written
# before the keys existed (post-norm) loads and resumes as post-norm
has() { head -c 65536 "$1" | grep -aq -- "$2"; }
"$T" train --data "$tmp/tiny.tsv" --out "$tmp/pre.safetensors" --epochs 8 --pre-norm "${small[@]}" > /dev/null 2>&1
if has "$tmp/a.safetensors" '"pre_norm":"1"' && has "$tmp/a.safetensors" '"encoder.norm.weight"' &&
   has "$tmp/a.safetensors" '"decoder.norm.bias"' && ! has "$tmp/a.safetensors" 'qk_norm' &&
   cmp -s "$tmp/a.safetensors" "$tmp/pre.safetensors"
then ok "the default model is pre-norm: pre_norm 1 and the final norms, the file of --pre-norm"
else no "the default checkpoint is not --pre-norm's"; fi
post=(--schedule constant --warmup 0 --post-norm)
"$T" train --data "$tmp/tiny.tsv" --out "$tmp/p4.safetensors" --epochs 4 "${small[@]}" "${post[@]}" > /dev/null 2>&1
"$T" train --data "$tmp/tiny.tsv" --out "$tmp/p2.safetensors" --epochs 2 "${small[@]}" "${post[@]}" > /dev/null 2>&1
if [ -s "$tmp/p2.safetensors" ] && ! has "$tmp/p2.safetensors" 'pre_norm\|qk_norm\|encoder\.norm\.' &&
   ! has tests/reference/tiny_model.safetensors 'pre_norm\|encoder\.norm\.' &&
   "$T" run --model tests/reference/tiny_model.safetensors "go ." > "$tmp/old.txt" 2>&1
then ok "--post-norm: no pre_norm key, no final norms (as an older file, which loads)"
else no "--post-norm or older checkpoint: $(cat "$tmp/old.txt")"; fi
# --resume without a norm flag: the checkpoint's post-norm, not the default
"$T" train --data "$tmp/tiny.tsv" --resume "$tmp/p2.safetensors" --out "$tmp/pr.safetensors" --epochs 4 \
    "${small[@]}" --schedule constant --warmup 0 > "$tmp/pr.log" 2>&1
if [ -s "$tmp/p4.safetensors" ] && cmp -s "$tmp/p4.safetensors" "$tmp/pr.safetensors"
then ok "--post-norm 2 epochs + --resume to 4 with no norm flag == --post-norm 4 epochs straight"
else no "resume of a post-norm model without a norm flag: $(tail -n 2 "$tmp/pr.log")"; fi
"$T" train --data "$tmp/tiny.tsv" --resume tests/reference/tiny_model.safetensors --out "$tmp/or.safetensors" \
    --epochs 2 --quiet > "$tmp/or.log" 2>&1
if [ -s "$tmp/or.safetensors" ] && ! has "$tmp/or.safetensors" 'pre_norm\|encoder\.norm\.' &&
   "$T" run --model "$tmp/or.safetensors" "go ." > /dev/null 2>&1
then ok "an older checkpoint resumed with no norm flag stays post-norm"
else no "resume of an older checkpoint: $(tail -n 2 "$tmp/or.log")"; fi
for flags in "p2|--pre-norm|pre_norm 0 (post-norm blocks)" "a|--post-norm|pre_norm 1 (pre-norm blocks)"; do
    IFS='|' read -r m flag saved <<< "$flags"
    "$T" train --data "$tmp/tiny.tsv" --resume "$tmp/$m.safetensors" --out "$tmp/never.safetensors" --epochs 9 \
        "$flag" "${small[@]}" > "$tmp/nf.log" 2>&1
    rc=$?
    if [ "$rc" = 2 ] && [ ! -e "$tmp/never.safetensors" ] &&
       grep -qF -- "$flag conflicts with --resume $tmp/$m.safetensors, saved with $saved" "$tmp/nf.log"
    then ok "--resume refuses $flag for a model saved with $saved"
    else no "--resume $m $flag: exit $rc, $(tail -n 2 "$tmp/nf.log")"; fi
done

# 9. make run prints both scores (a short run of a small model; not on a
# sanitizer build, which make would rebuild with the default flags)
if [ "$SANITIZED" != 1 ]; then
    if make -s --no-print-directory run BUILD="$B" RUN_MODEL="$tmp/run.safetensors" \
           RUN_FLAGS="--epochs 1 --hidden 16 --heads 2 --ffn 32 --layers 1 --quiet" > "$tmp/run.log" 2>&1 &&
       grep -q '^training data: sources 2338  exact match [0-9.]*  BLEU [0-9.]*' "$tmp/run.log" &&
       grep -q '^held-out: *sources 259  exact match [0-9.]*  BLEU [0-9.]*' "$tmp/run.log"
    then ok "make run: training-data and held-out scores"; else no "make run: $(tail -n 5 "$tmp/run.log")"; fi
fi

echo "translate: $pass passed, $fail failed"
[ "$fail" = 0 ]
