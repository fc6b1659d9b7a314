#!/usr/bin/env bash
# tests/explorer/test_explorer.sh BUILD_DIR: the explorer pages (--html) in a
# real browser, Debian's chromium, headless, driven from the command line.
#
# Each program writes its page; chromium opens it from file:// with a
# selection in the URL (?attn=cross&layer=1&head=1&token=2), lets its script
# run and dumps the DOM; check_page.py compares what the page shows with the
# numbers the program wrote (the JSON inside the page, and a second output of
# the same run: the SVG heatmaps of --attention, the --json reports):
#   - attention (translate run, gpt sample): the selected layer, head and
#     token; the row's weights and scores exactly the program's; masked keys
#     shown masked with weight 0; softmax(scores) = weights; the neuron
#     view's sum_d q[d] k[d] times the scale = the model's score; the heatmap's
#     columns are the keys (source tokens for cross-attention); the row as
#     --attention's SVG drew it; the legend's range that of every head of the
#     layer; the cells dark (0) to bright, brighter as the weight grows;
#     masked cells hatched exactly where the mask is 0; decoder rows
#     predicting the next token; 32 tokens fit the window (the grid scrolls);
#   - embeddings: token, position and sum as the program wrote them, sum =
#     token + position, the positions those of the model file (GPT) or
#     the sinusoids (translator), the legend's range the data's; x's
#     cells blue below 0, white at 0, red above, as deep as |x| / the bound;
#   - ffn: the hidden units as written, within the activation's range;
#   - output: the top 5 per position as written, p = exp(logit - lse) (the
#     softmax), the top token the one greedy decoding printed;
#   - backward (backward_tour): P dP dS dQ dK dV, every check ok, every cell
#     the program's number, dS = P (dP - rowsum(dP P)) from the page's P, dP;
#     rows labelled, the mask hatched, one legend per group of panels;
#   - training (translate train, gpt train): every value the program's;
#     entropies as train --json recorded them, held-out losses as gpt's.
# And for every page: no http(s) URL in it; a Content-Security-Policy of
# default-src 'none'; the drawing functions reading no page state (another
# page can draw with them alone); no console error in chromium's
# log (a page with broken data is caught: the check itself is tested);
# chromium runs with a proxy to nowhere, so a fetch would fail; a
# screenshot is taken.  Training the pages' models takes a few seconds.
#
# chromium is installed with apt-get when missing and the script runs as
# root; otherwise the test is skipped with a message.  Needs /usr/bin/python3
# (installed the same way).  Prints 'N passed, N failed'; exits 1 on a failure.
set -u
B=${1:-build}
BIN=$B/translate TIMEOUT=120
. "$(dirname "$0")/../lib.sh" # tmp, ok, no, finish
here=$(dirname "$0")

NAME=explorer
. "$here/../browser.sh" # need, browse, offline, shot; $PY

# check NAME PAGE QUERY MODE ARGS...: open PAGE?QUERY, no console error, the DOM checked
check() {
    local name=$1 page=$2 q=$3 mode=$4
    shift 4
    browse "file://$(realpath "$page")?$q" "$tmp/$name.log" --dump-dom > "$tmp/$name.dom"
    if grep -q 'CONSOLE' "$tmp/$name.log"; then no "$name: console: $(grep CONSOLE "$tmp/$name.log" | head -3)"; return; fi
    if ! grep -q 'data-ready="1"' "$tmp/$name.dom"; then no "$name: the page's script did not finish"; return; fi
    if $PY "$here/check_page.py" "$mode" "$page" "$tmp/$name.dom" "$@" > "$tmp/$name.out"; then
        ok; sed "s/^/  $name: /" "$tmp/$name.out"
    else no "$name: $(tail -n 1 "$tmp/$name.out")"; fi
}
out=$B/explorer
mkdir -p "$out"

# ---- the translator: train (a page), run (a page and the SVGs) ---------------
head -n 400 examples/data/eng-fra.tsv > "$tmp/train.tsv"
sed -n 401,480p examples/data/eng-fra.tsv > "$tmp/test.tsv"
small=(--hidden 16 --heads 2 --ffn 32 --layers 2 --batch 16 --seed 3 --optimizer adam --lr 0.01)
if "$B/translate" train --data "$tmp/train.tsv" --test "$tmp/test.tsv" --out "$tmp/t.safetensors" --epochs 6 \
    "${small[@]}" --html "$out/translate-train.html" --json "$tmp/t.json" > "$tmp/t.log" 2>&1; then ok
else no "translate train --html: $(tail -n 3 "$tmp/t.log")"; fi
"$B/translate" run --model "$tmp/t.safetensors" --html "$out/translate-run.html" --attention "$tmp/svg" \
    "i lost ." "he's calm ." > "$tmp/r.out" 2> "$tmp/r.log" || no "translate run --html: $(tail -n 3 "$tmp/r.log")"
check t-cross "$out/translate-run.html" "sentence=1&attn=cross&layer=1&head=1&token=1" attention 1 cross 1 1 1 \
    "$tmp/svg/1-cross-1.svg"
check t-decoder "$out/translate-run.html" "attn=decoder&layer=0&head=0&token=0" attention 0 decoder 0 0 0 \
    "$tmp/svg/0-decoder-0.svg"
check t-encoder "$out/translate-run.html" "attn=encoder&layer=1&head=1&token=2" attention 0 encoder 1 1 2 \
    "$tmp/svg/0-encoder-1.svg"
check t-emb "$out/translate-run.html" "sentence=1&view=embeddings&emb=0" embeddings 1 0
check t-emb-target "$out/translate-run.html" "view=embeddings&emb=1" embeddings 0 1
check t-ffn "$out/translate-run.html" "sentence=1&view=ffn&ffn=3" ffn 1 3
check t-output "$out/translate-run.html" "sentence=1&view=output" output 1 translation "$tmp/r.out"
check t-train "$out/translate-train.html" "epoch=4" training 4 "$tmp/t.json" translate
# the page changes nothing: the same model without --html
"$B/translate" train --data "$tmp/train.tsv" --test "$tmp/test.tsv" --out "$tmp/t0.safetensors" --epochs 6 \
    "${small[@]}" > /dev/null 2>&1
if cmp -s "$tmp/t.safetensors" "$tmp/t0.safetensors"; then ok; else no "translate train --html wrote another model"; fi

# ---- the GPT: train (a page), sample (a page) ---------------------------------
gsmall=(--context 32 --hidden 16 --heads 2 --ffn 32 --layers 2 --batch 8 --steps 40 --eval-every 10)
if "$B/gpt" train --data "$tmp/train.tsv" --out "$tmp/g.safetensors" "${gsmall[@]}" --quiet \
    --html "$out/gpt-train.html" --json "$tmp/g.json" > "$tmp/g.log" 2>&1 &&
    "$B/gpt" sample --model "$tmp/g.safetensors" --prompt "I " --length 40 --seed 1 \
        --html "$out/gpt-sample.html" > "$tmp/s.log" 2>&1 &&
    "$B/gpt" sample --model "$tmp/g.safetensors" --prompt "I " --length 20 --temperature 0 \
        --html "$out/gpt-greedy.html" > "$tmp/greedy.out" 2> "$tmp/s.log"; then ok
else no "gpt --html: $(tail -n 3 "$tmp/g.log" "$tmp/s.log")"; fi
check g-sample "$out/gpt-sample.html" "layer=1&head=1&token=4" attention 0 self 1 1 4
# 32 tokens: the grid scrolls in its frame, labels kept (scroll_probe.js scrolls it)
$PY -c 'import sys; page, js = (open(f).read() for f in sys.argv[1:]); print(page.replace("</body>", "<script>\n" + js + "</script>\n</body>"), end="")' \
    "$out/gpt-sample.html" "$here/scroll_probe.js" > "$tmp/scroll.html"
check g-scroll "$tmp/scroll.html" "layer=1&head=0&token=31" scroll
check g-emb "$out/gpt-greedy.html" "view=embeddings" embeddings 0 0 "$tmp/g.safetensors"
check g-ffn "$out/gpt-greedy.html" "view=ffn&ffn=1" ffn 0 1
check g-output "$out/gpt-greedy.html" "view=output" output 0 greedy "$tmp/greedy.out" 2
check g-train "$out/gpt-train.html" "epoch=2" training 2 "$tmp/g.json" gpt
"$B/gpt" train --data "$tmp/train.tsv" --out "$tmp/g0.safetensors" "${gsmall[@]}" --quiet > /dev/null 2>&1
if cmp -s "$tmp/g.safetensors" "$tmp/g0.safetensors"; then ok; else no "gpt train --html wrote another model"; fi

# ---- the backward tour -----------------------------------------------------------
"$B/backward_tour" --html "$out/backward.html" > "$tmp/b.log" 2>&1 || no "backward_tour --html: $(tail -n 3 "$tmp/b.log")"
check backward "$out/backward.html" "panel=dS" backward dS

# ---- every page: offline, masked cells hatched, and a screenshot of each view -----
for p in translate-run translate-train gpt-sample gpt-greedy gpt-train backward; do offline "$out/$p.html"; done
# its Content-Security-Policy forbids loading anything (docs/explorer.md: the page is self-contained)
for p in translate-run translate-train gpt-sample gpt-greedy gpt-train backward; do
    if grep -q "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; " "$out/$p.html"; then ok
    else no "$p.html: no Content-Security-Policy of default-src 'none'"; fi
done
# the drawing functions read no page state, so another page can draw with them alone
if grep -nE '\b(state|data|document|window|query)\.' src/viz/explorer_draw_js.c > "$tmp/state.txt"; then
    no "the drawing functions read page state: $(head -n 2 "$tmp/state.txt")"
else ok; fi
if grep -q 'td\.masked[^{]*{background:repeating-linear-gradient' "$out/backward.html"; then ok
else no "the page's style draws no hatching for masked cells"; fi
shot "$out/translate-run.html" "sentence=1&attn=cross&layer=1&head=1&token=1" "$out/translate-run.png"
shot "$out/translate-run.html" "sentence=1&attn=decoder&layer=1&head=0&token=2" "$out/translate-decoder.png"
shot "$out/translate-run.html" "sentence=1&view=embeddings" "$out/translate-embeddings.png"
shot "$out/translate-run.html" "sentence=1&view=ffn&ffn=2" "$out/translate-ffn.png"
shot "$out/translate-run.html" "sentence=1&view=output" "$out/translate-output.png"
shot "$out/gpt-sample.html" "layer=1&head=0&token=20" "$out/gpt-sample.png"
shot "$out/gpt-greedy.html" "view=embeddings" "$out/gpt-embeddings.png"
shot "$out/gpt-greedy.html" "view=ffn&ffn=1" "$out/gpt-ffn.png"
shot "$out/gpt-greedy.html" "view=output" "$out/gpt-output.png"
shot "$out/backward.html" "panel=dS" "$out/backward.png"
shot "$out/translate-train.html" "" "$out/translate-train.png"

# ---- a page that cannot be written: exit 1, a message naming it, no file -----------
bad_path() { # NAME COMMAND...
    local name=$1
    shift
    "$@" > /dev/null 2> "$tmp/e.log"
    local rc=$?
    if [ $rc = 1 ] && grep -qF "$tmp/none/p.html" "$tmp/e.log" && [ ! -e "$tmp/none" ]; then ok
    else no "$name --html into a missing folder: exit $rc, $(head -c 200 "$tmp/e.log")"; fi
}
bad_path "translate run" "$B/translate" run --model "$tmp/t.safetensors" --html "$tmp/none/p.html" "go ."
bad_path "gpt sample" "$B/gpt" sample --model "$tmp/g.safetensors" --length 3 --html "$tmp/none/p.html"
bad_path "backward_tour" "$B/backward_tour" --html "$tmp/none/p.html"

# ---- the console check catches an error: a page whose data the script cannot draw
printf '{"kind": "attention", "inputs": []}' > "$tmp/bad.json"
sed -e '/<script type="application\/json" id="data">/,/<\/script>/{//!d}' \
    -e '/<script type="application\/json" id="data">/r '"$tmp/bad.json" "$out/gpt-sample.html" > "$tmp/bad.html"
browse "file://$tmp/bad.html" "$tmp/bad.log" --dump-dom > /dev/null
if grep -q 'CONSOLE.*Uncaught' "$tmp/bad.log"; then ok; else no "a broken page gave no console error"; fi
finish explorer
