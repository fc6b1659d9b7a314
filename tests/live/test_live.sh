#!/usr/bin/env bash
# tests/live/test_live.sh BUILD_DIR: the live pages (--live) in a real
# browser, Debian's chromium, headless, against the native programs.
#
# The programs write their pages (holding build/wasm/*.wasm, make wasm);
# chromium opens each from file:// with a request in the URL, the page runs
# the program compiled to WebAssembly on it, and check_live.py compares what
# the page computed and drew with the native program's JSON for the same
# request (within 1e-5):
#   - the translator (a small model trained here, as the explorer test
#     does): the typed sentence "i lost ." -> its translation and every
#     attention map, weights, scores, q and k;
#     and the same with two heads switched off (--head-off);
#   - the GPT (trained here too): the typed prompt "We " -> the sample
#     (the same seed, temperature and top-k) and its attention maps;
#     and the same with a head switched off (--head-off self:0:0);
#   - the ladder: rung 8 (pre-norm) trained for 10 steps in the page, the
#     typed line "We go." -> its attention maps and next characters;
#   - the backward tour: the mask edited (query 0 may see key 1, query 3 may
#     not see key 1) and five training steps taken one by one in the page:
#     the five losses, P, dP, dS, dQ, dK, dV and their checks;
# and for every page: no console error in chromium's log, no http(s) URL in
# it, chromium run with a proxy to nowhere (a fetch would fail); a program
# that fails in the page (a bad --mask) is a console error (the check is
# tested).  Screenshots of a typed sentence, a mask edit and a training
# step, the page sizes and the times the page measured stay in
# $BUILD/live/.
#
# chromium and /usr/bin/python3 are installed with apt-get when missing (as
# root), else the test is skipped with a message.  Prints 'N passed, N
# failed'; exits 1 on a failure.
set -u
B=${1:-build}
BIN=$B/translate TIMEOUT=120
. "$(dirname "$0")/../lib.sh" # tmp, ok, no, finish
here=$(dirname "$0")

NAME=live
. "$here/../browser.sh" # need, browse, offline, shot; $PY

# The page's DOM once its runs are done: virtual time lets the page's
# promises (compile, instantiate, run) go to their end before the dump.
run_page() { # URL LOG: the DOM on stdout
    browse "$1" "$2" --virtual-time-budget=60000 --dump-dom
}
# check NAME PAGE QUERY MODE NATIVE.json: the page run on QUERY, checked
check() {
    local name=$1 page=$2 q=$3 mode=$4 native=$5
    run_page "file://$(realpath "$page")?$q" "$tmp/$name.log" > "$tmp/$name.dom"
    if grep -q 'CONSOLE' "$tmp/$name.log"; then no "$name: console: $(grep CONSOLE "$tmp/$name.log" | head -3)"; return; fi
    if $PY "$here/check_live.py" "$mode" "$tmp/$name.dom" "$native" > "$tmp/$name.out"; then
        ok; sed "s/^/  $name: /" "$tmp/$name.out"
    else no "$name: $(tail -n 1 "$tmp/$name.out")"; fi
}
out=$B/live
mkdir -p "$out"

# ---- the translator: a typed sentence ------------------------------------------
head -n 400 examples/data/eng-fra.tsv > "$tmp/train.tsv"
small=(--hidden 16 --heads 2 --ffn 32 --layers 2 --batch 16 --seed 3 --optimizer adam --lr 0.01)
if "$B/translate" train --data "$tmp/train.tsv" --out "$tmp/t.safetensors" --epochs 6 "${small[@]}" --quiet \
    > "$tmp/t.log" 2>&1 && "$B/translate" run --model "$tmp/t.safetensors" --live "$out/translate.html" "go ." \
    > "$tmp/r.log" 2>&1; then ok
else no "translate --live: $(tail -n 3 "$tmp/t.log" "$tmp/r.log")"; fi
"$B/translate" run --model "$tmp/t.safetensors" --json "$tmp/t-native.json" "i lost ." > /dev/null 2>&1 ||
    no "translate run --json failed"
check translate "$out/translate.html" "live_input=i%20lost%20." attention "$tmp/t-native.json"
# two heads switched off: the outputs and the weights after them change, as natively
off=(--head-off cross:1:0 --head-off encoder:0:1)
"$B/translate" run --model "$tmp/t.safetensors" "${off[@]}" --json "$tmp/t-off.json" "i lost ." > /dev/null 2>&1 ||
    no "translate run --head-off --json failed"
if cmp -s "$tmp/t-off.json" "$tmp/t-native.json"; then no "--head-off changed nothing"; else ok; fi
check translate-off "$out/translate.html" "live_input=i%20lost%20.&live_head_off=cross:1:0;encoder:0:1" attention \
    "$tmp/t-off.json"

# ---- the GPT: a typed prompt ------------------------------------------------------
gsmall=(--context 12 --hidden 16 --heads 2 --ffn 32 --layers 2 --batch 8 --steps 40 --eval-every 10)
sample=(--length 20 --seed 1 --temperature 0.8 --top-k 5)
if "$B/gpt" train --data "$tmp/train.tsv" --out "$tmp/g.safetensors" "${gsmall[@]}" --quiet > "$tmp/g.log" 2>&1 &&
    "$B/gpt" sample --model "$tmp/g.safetensors" --prompt "I " "${sample[@]}" --live "$out/gpt.html" \
        > "$tmp/s.log" 2>&1; then ok
else no "gpt --live: $(tail -n 3 "$tmp/g.log" "$tmp/s.log")"; fi
"$B/gpt" sample --model "$tmp/g.safetensors" --prompt "We " "${sample[@]}" --json "$tmp/g-native.json" \
    > /dev/null 2>&1 || no "gpt sample --json failed"
check gpt "$out/gpt.html" "live_input=We%20" attention "$tmp/g-native.json"
# a head switched off, as the page's button names it (the maps' kind "self")
"$B/gpt" sample --model "$tmp/g.safetensors" --prompt "We " "${sample[@]}" --head-off self:0:0 \
    --json "$tmp/g-off.json" > /dev/null 2>&1 || no "gpt sample --head-off --json failed"
if cmp -s "$tmp/g-off.json" "$tmp/g-native.json"; then no "gpt --head-off changed nothing"; else ok; fi
check gpt-off "$out/gpt.html" "live_input=We%20&live_head_off=self:0:0" attention "$tmp/g-off.json"

# ---- the backward tour: a mask edit, five training steps -------------------------
"$B/backward_tour" --live "$out/backward_tour.html" > "$tmp/b.log" 2>&1 ||
    no "backward_tour --live: $(tail -n 3 "$tmp/b.log")"
"$B/backward_tour" --mask 0,1 --mask 3,1 --steps 5 --json "$tmp/b-native.json" > /dev/null 2>&1 ||
    no "backward_tour --json failed"
check tour "$out/backward_tour.html" "live_mask=0,1;3,1&live_steps=5" backward "$tmp/b-native.json"

# ---- the ladder: a rung trained in the page, a typed line --------------------------
# the page made after 5 steps, asked in it for 10: the same weights as 10 natively (more steps, more
# of the native kernels' rounding in the weights: 3e-6 at 10 steps, 4e-6 at 20)
"$B/ladder" 8 --steps 5 --live "$out/ladder.html" > "$tmp/l.log" 2>&1 || no "ladder --live: $(tail -n 3 "$tmp/l.log")"
"$B/ladder" 8 --steps 10 --input "We go." --json "$tmp/l-native.json" > /dev/null 2>&1 || no "ladder --json failed"
check ladder "$out/ladder.html" "live_input=We%20go.&live_train=10" attention "$tmp/l-native.json"

# ---- every page: offline, its size, and screenshots -------------------------------
# (in real time, 5 s each, so that the times the page shows are real: in
# virtual time a run takes 0 ms)
for p in translate gpt backward_tour ladder; do
    offline "$out/$p.html"
    echo "  $p.html: $(wc -c < "$out/$p.html") bytes"
done
shot "$out/translate.html" "live_input=i%20lost%20.&attn=cross&layer=1&head=1&token=1" "$out/translate-typed.png" --timeout=5000
shot "$out/gpt.html" "live_input=We%20&layer=1&head=0&token=6" "$out/gpt-typed.png" --timeout=5000
shot "$out/backward_tour.html" "live_mask=0,1;3,1" "$out/tour-mask.png" --timeout=5000
shot "$out/backward_tour.html" "live_mask=0,1;3,1&live_steps=5" "$out/tour-steps.png" --timeout=5000

# ---- the console check catches a program that fails in the page ------------------
run_page "file://$(realpath "$out/backward_tour.html")?live_mask=9,9" "$tmp/bad.log" > "$tmp/bad.dom"
if grep -q 'CONSOLE.*--mask wants ROW,COL' "$tmp/bad.log" && grep -q 'live-error">backward_tour: --mask' "$tmp/bad.dom"
then ok; else no "a program failing in the page gave no console error and no message"; fi
finish live
