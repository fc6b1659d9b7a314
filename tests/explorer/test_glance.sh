#!/usr/bin/env bash
# tests/explorer/test_glance.sh BUILD_DIR: the model at a glance (the
# overview, the model view, the head lines: src/viz/overview_js.c) on the
# translator's and the GPT's pages, clicked in Debian's chromium, headless,
# by tests/explorer/glance.js (puppeteer-core, installed with npm into
# BUILD_DIR/node when missing), which checks every box against the JSON in
# the page (its "config" and its attention maps: see glance.js):
#   - translate run --html, two sentences, and with --head-off cross:1:0;
#   - gpt sample --html, and with --head-off self:0:1;
#   - other shapes: a post-norm translator and a GPT of 3 layers, 4 heads;
#     the ladder's rungs 3 (no feed-forward, residual or norm), 6 and 7;
#   - the translator's live page (make wasm): "i lost ." typed and head
#     cross:1:0 switched off in the page: the overview, the model view and
#     the mark of the head off drawn again from what the program printed;
#   - every layer-norm and residual box: its view's numbers recomputed
#     from the JSON (glance.js);
#   - a page whose config says a head more than its maps hold, and one
#     whose layer norms say a wrong eps: a check fails (so it can).
# Each page also: no console error; the size of the page under 5 MB.
# Small models trained here as tests/explorer/test_explorer.sh trains them.
# Prints 'N passed, N failed'; exits 1 on a failure.
set -u
B=${1:-build}
BIN=$B/translate TIMEOUT=120
. "$(dirname "$0")/../lib.sh" # tmp, ok, no, finish
here=$(dirname "$0")

NAME=glance
. "$here/../browser.sh" # need, browse, offline, shot; $PY
if ! clicker; then
    no "puppeteer-core is missing and could not be installed with npm: the pages cannot be clicked"
    finish glance
fi
export NODE_PATH=$(realpath "$B/node/node_modules")

# glance NAME PAGE QUERY [OFF]: glance.js on PAGE?QUERY, each of its checks
# counted; [fail]: the page is expected to fail a check
glance() {
    local name=$1 page=$2 q=$3 off=${4:-} expect=${5:-pass}
    if ! node "$here/glance.js" "$(realpath "$page")" "$q" $off > "$tmp/$name.json" 2> "$tmp/$name.err"; then
        no "$name: glance.js: $(tail -n 3 "$tmp/$name.err")"
        return
    fi
    $PY - "$tmp/$name.json" "$name" "$expect" << 'PY' > "$tmp/$name.out"
import json, sys
r = json.load(open(sys.argv[1])); name, expect = sys.argv[2], sys.argv[3]
bad = [c for c in r["checks"] if not c["ok"]]
if expect.startswith("fail"): # fail:WORDS: a check whose message holds WORDS
    bad = [c for c in bad if expect[5:] in c["what"]]
    print(("ok " if bad else "FAIL ") + "%s: a check fails, as it must: %s" % (name, bad[0]["what"] if bad else "none"))
    sys.exit(0)
for c in r["checks"]: print(("ok   " if c["ok"] else "FAIL ") + name + ": " + c["what"])
if r["console"]: print("FAIL %s: console: %s" % (name, r["console"][:3]))
PY
    while read -r word rest; do
        if [ "$word" = ok ]; then ok; else no "$rest"; fi
    done < "$tmp/$name.out"
    grep '^ok' "$tmp/$name.out" | sed 's/^ok */  /'
    local bytes=$(stat -c %s "$page")
    if [ "$bytes" -le 5000000 ]; then ok; else no "$name: the page is $bytes bytes, over 5 MB"; fi
}
out=$B/explorer
mkdir -p "$out"

head -n 400 examples/data/eng-fra.tsv > "$tmp/train.tsv"
sed -n 401,480p examples/data/eng-fra.tsv > "$tmp/test.tsv"
"$B/translate" train --data "$tmp/train.tsv" --test "$tmp/test.tsv" --out "$tmp/t.safetensors" --epochs 6 \
    --hidden 16 --heads 2 --ffn 32 --layers 2 --batch 16 --seed 3 --optimizer adam --lr 0.01 --quiet > "$tmp/t.log" 2>&1 ||
    no "translate train: $(tail -n 3 "$tmp/t.log")"
"$B/translate" run --model "$tmp/t.safetensors" --html "$out/glance-translate.html" "i lost ." "he's calm ." > /dev/null 2>&1 &&
    "$B/translate" run --model "$tmp/t.safetensors" --html "$out/glance-translate-off.html" --head-off cross:1:0 \
        "i lost ." > /dev/null 2>&1 || no "translate run --html failed"
glance translate "$out/glance-translate.html" "sentence=1&attn=cross&layer=1&head=1&token=1"
glance translate-off "$out/glance-translate-off.html" "attn=encoder&layer=0&head=0" cross:1:0

"$B/gpt" train --data "$tmp/train.tsv" --out "$tmp/g.safetensors" --context 32 --hidden 16 --heads 2 --ffn 32 \
    --layers 2 --batch 8 --steps 40 --eval-every 10 --quiet > "$tmp/g.log" 2>&1 || no "gpt train: $(tail -n 3 "$tmp/g.log")"
"$B/gpt" sample --model "$tmp/g.safetensors" --prompt "I " --length 40 --seed 1 --html "$out/glance-gpt.html" \
    > /dev/null 2>&1 && "$B/gpt" sample --model "$tmp/g.safetensors" --prompt "I " --length 40 --seed 1 \
    --head-off self:0:1 --html "$out/glance-gpt-off.html" > /dev/null 2>&1 || no "gpt sample --html failed"
glance gpt "$out/glance-gpt.html" "layer=1&head=0&token=20"
glance gpt-off "$out/glance-gpt-off.html" "view=ffn" self:0:1

# other shapes draw themselves: a post-norm translator of 3 layers and 4 heads, a GPT of 3 layers and 4 heads
"$B/translate" train --data "$tmp/train.tsv" --out "$tmp/t3.safetensors" --epochs 1 --post-norm --hidden 16 --heads 4 \
    --ffn 32 --layers 3 --batch 16 --seed 3 --quiet > "$tmp/t3.log" 2>&1 &&
    "$B/translate" run --model "$tmp/t3.safetensors" --html "$out/glance-translate-3.html" "i lost ." > /dev/null 2>&1 ||
    no "translate --post-norm --layers 3: $(tail -n 3 "$tmp/t3.log")"
glance translate-3 "$out/glance-translate-3.html" "attn=decoder&layer=2&head=3&token=2"
"$B/gpt" train --data "$tmp/train.tsv" --out "$tmp/g3.safetensors" --context 16 --hidden 16 --heads 4 --ffn 32 \
    --layers 3 --batch 8 --steps 5 --eval-every 5 --quiet > "$tmp/g3.log" 2>&1 &&
    "$B/gpt" sample --model "$tmp/g3.safetensors" --prompt "I " --length 20 --seed 1 --html "$out/glance-gpt-3.html" \
        > /dev/null 2>&1 || no "gpt --layers 3: $(tail -n 3 "$tmp/g3.log")"
glance gpt-3 "$out/glance-gpt-3.html" "layer=2&head=3&token=5"

# the ladder's rungs: one head without feed-forward, residual or norm (3); residual without norm (6); post-norm (7)
for r in 3 6 7; do
    "$B/ladder" $r --steps 20 --input "We go." --html "$out/glance-ladder-$r.html" > "$tmp/l.log" 2>&1 ||
        no "ladder $r --html: $(tail -n 3 "$tmp/l.log")"
    glance ladder-$r "$out/glance-ladder-$r.html" "layer=1&token=3"
done

# the live page: the program's output drawn again, a head switched off in the page
if [ -f "$B/wasm/translate.wasm" ]; then
    "$B/translate" run --model "$tmp/t.safetensors" --live "$out/glance-live.html" "go ." > /dev/null 2>&1 ||
        no "translate run --live failed"
    glance live "$out/glance-live.html" "live_input=i%20lost%20.&live_head_off=cross:1:0&attn=cross&layer=1" cross:1:0
else no "no $B/wasm/translate.wasm (make wasm): the live page is not checked"; fi

# the check can fail: the config says a head more than the maps hold
sed 's/"config": {"layers": 2, "heads": 2,/"config": {"layers": 2, "heads": 3,/' "$out/glance-gpt.html" > "$tmp/wrong.html"
if grep -q '"heads": 3,' "$tmp/wrong.html"; then glance wrong "$tmp/wrong.html" "" "" fail
else no "the wrong page was not made"; fi
# and a page whose layer norms say eps 0.5: y no longer (x - mean) / sqrt(var + eps) * gamma + beta
sed 's/"eps": 1e-05,/"eps": 0.5,/g' "$out/glance-gpt.html" > "$tmp/wrong-eps.html"
if grep -q '"eps": 0.5,' "$tmp/wrong-eps.html"; then glance wrong-eps "$tmp/wrong-eps.html" "" "" "fail:layer norm: every shown y"
else no "the page with a wrong eps was not made"; fi
finish glance
