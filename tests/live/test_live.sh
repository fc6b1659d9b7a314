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
#     typed line "We go." -> its attention maps and next characters; its
#     step box given 2.5, 0 or 1000001: a message beside it, no run;
#   - the backward tour: the mask edited (query 0 may see key 1, query 3 may
#     not see key 1) and five training steps taken one by one in the page:
#     the five losses, P, dP, dS, dQ, dK, dV and their checks; a query
#     that may see no key (--mask 0,0): computed, checked and explained;
#     the step box given 2.5, -3 or 0: a message beside it, no run; 600
#     steps, then 600 more refused (1000 at most); the edited cells framed;
#   - clicked (tests/live/drive.js, puppeteer-core from npm): the ladder
#     trains 500 steps in a Web Worker, its progress shown, the page's
#     thread busy under a tenth of the run; its stop button keeps the model
#     trained so far (the native one for as many steps); the tour's step
#     box typed 2.5 then 3; a run that fails after one that worked; a
#     heatmap row clicked follows its query, a head's thumbnail chooses it;
# the times the page measured on <body>; --wasm FILE taken, a missing one named;
# the model at a glance's script and style on the attention pages only;
# and for every page: no console error in chromium's log, no http(s) URL in
# it, chromium run with a proxy to nowhere (a fetch would fail); a program
# that fails in the page (a bad --mask) is one line beside the controls,
# the pictures marked stale, and a console error (the check is tested).
# Screenshots of a typed sentence, a mask edit and a training step, the
# page sizes and the times the page measured stay in $BUILD/live/.
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
# a page clicked as a learner clicks it (tests/live/drive.js): puppeteer-core, from npm
clicker # status checked by clickable below
drive() { NODE_PATH="$B/node/node_modules" node "$here/drive.js" "$@"; }
clickable() { [ -d "$B/node/node_modules/puppeteer-core" ]; }
clickable || no "puppeteer-core is missing and could not be installed with npm: the pages cannot be clicked"

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
# a query that may see no key (query 0 forbidden key 0): computed, checked, and said
"$B/backward_tour" --mask 0,0 --json "$tmp/b-row.json" > /dev/null 2>&1 || no "backward_tour --mask 0,0 --json failed"
check tour-row "$out/backward_tour.html" "live_mask=0,0" backward "$tmp/b-row.json"
$PY "$here/check_live.py" state "$tmp/tour-row.dom" > "$tmp/row.state"
if grep -q '^note=.*Query 0 may see no key.*row 0 of P is 0.*dS and dQ are 0 on that row' "$tmp/row.state"; then ok
else no "the tour's page does not say what P and the gradients are for a fully masked row"; fi
# the step box: 2.5, -3 and 0 are not steps: a message beside it, no run
for v in 2.5 -3 0; do
    run_page "file://$(realpath "$out/backward_tour.html")?live_count=$v&live_steps=1" "$tmp/count.log" > "$tmp/count.dom"
    $PY "$here/check_live.py" state "$tmp/count.dom" > "$tmp/count.state"
    if grep -qF "messages=[\"a whole number from 1 to 1000, please (not \\\"$v\\\")\"]" "$tmp/count.state" &&
        grep -q '^steps=0$' "$tmp/count.state" && grep -q '^error=""$' "$tmp/count.state" &&
        ! grep -q CONSOLE "$tmp/count.log"; then ok
    else no "the step box given '$v': $(tr '\n' ' ' < "$tmp/count.state" | cut -c1-300)"; fi
done

# the tour takes at most 1000 steps in all: 600, then a click of 600 more is refused (400 are left)
run_page "file://$(realpath "$out/backward_tour.html")?live_count=600&live_steps=2" "$tmp/most.log" > "$tmp/most.dom"
$PY "$here/check_live.py" state "$tmp/most.dom" > "$tmp/most.state"
if grep -qF 'messages=["a whole number from 1 to 400, please (not \"600\")"]' "$tmp/most.state" &&
    grep -q '^steps=600$' "$tmp/most.state" && grep -q '^error=""$' "$tmp/most.state"; then ok
else no "the tour past 1000 steps: $(tr '\n' ' ' < "$tmp/most.state" | cut -c1-300)"; fi

# ---- the ladder: a rung trained in the page, a typed line --------------------------
# the page made after 5 steps, asked in it for 10: the same weights as 10 natively (more steps, more
# of the native kernels' rounding in the weights: 3e-6 at 10 steps, 4e-6 at 20)
"$B/ladder" 8 --steps 5 --live "$out/ladder.html" > "$tmp/l.log" 2>&1 || no "ladder --live: $(tail -n 3 "$tmp/l.log")"
"$B/ladder" 8 --steps 10 --input "We go." --json "$tmp/l-native.json" > /dev/null 2>&1 || no "ladder --json failed"
# (it trains in a worker: the page is waited for by puppeteer, not by --dump-dom's virtual time)
if clickable && drive dom "$(realpath "$out/ladder.html")" "live_input=We%20go.&live_train=10" "$tmp/ladder.dom" \
    > "$tmp/ladder.drive" 2>&1 && ! grep -q '"error: ' "$tmp/ladder.drive"; then
    if $PY "$here/check_live.py" attention "$tmp/ladder.dom" "$tmp/l-native.json" > "$tmp/ladder.out"; then
        ok; sed "s/^/  ladder: /" "$tmp/ladder.out"
    else no "ladder: $(tail -n 1 "$tmp/ladder.out")"; fi
else no "ladder: the page did not run: $(tail -c 300 "$tmp/ladder.drive" 2>/dev/null)"; fi

# the ladder's step box: 2.5, 0 and 1000001 are not step counts: a message beside it, no run
for v in 2.5 0 1000001; do
    run_page "file://$(realpath "$out/ladder.html")?live_input=We&live_train=$v" "$tmp/tbox.log" > "$tmp/tbox.dom"
    $PY "$here/check_live.py" state "$tmp/tbox.dom" > "$tmp/tbox.state"
    if grep -qF "messages=[\"a whole number from 1 to 1000000, please (not \\\"$v\\\")\"]" "$tmp/tbox.state" &&
        grep -q '^steps=None$' "$tmp/tbox.state" && grep -q '^error=""$' "$tmp/tbox.state" && ! grep -q CONSOLE "$tmp/tbox.log"
    then ok; else no "the ladder's step box given '$v': $(tr '\n' ' ' < "$tmp/tbox.state" | cut -c1-300)"; fi
done

# ---- the ladder trains in a worker: clicked (puppeteer-core), 500 steps ---------------
# The page stays responsive: the training is not its thread's work (the
# performance timeline's long tasks, over 50 ms each, add up to under a
# tenth of the run, where a run on the page's thread is one task as long as
# the run; how long the longest is depends on the machine's load, so it is
# printed here and measured by `make live-times`, not tested), it shows its
# progress, and its stop button keeps the model trained so far: the page's
# numbers are then the native program's for the steps it reports.
if clickable; then
    if drive train "$(realpath "$out/ladder.html")" 500 > "$tmp/train.json" 2> "$tmp/train.err"; then
        if $PY - "$tmp/train.json" <<'PYEOF'
import json, re, sys
r = json.load(open(sys.argv[1]))
steps = [int(m.group(1)) for m in (re.match(r"step (\d+) of 500, loss [0-9.]+ \(nats\)$", s) for s in r["seen"]) if m]
during = [t for t in r["long"] if t["at"] < r["trained"]]
after = [t for t in r["long"] if t["at"] >= r["trained"]]
data = json.loads(r["json"])
print("  ladder, 500 steps in a worker: %d progress lines seen (%s ...), %.1f s; long tasks while training: %s; "
      "after (the pictures): %s" % (len(steps), steps[:4], r["ms"] / 1000,
      [round(t["ms"]) for t in during] or "none", [round(t["ms"]) for t in after] or "none"))
bad = [] if len(steps) >= 5 and steps == sorted(steps) and steps[-1] >= 400 else ["progress: %s" % steps[:8]]
busy = sum(t["ms"] for t in during)
bad += [] if busy < 0.1 * r["ms"] else ["the page's thread busy %.0f of the run's %.0f ms" % (busy, r["ms"])]
bad += [] if data["steps"] == 500 and "computed in the page" in r["status"] and not r["error"] else \
    ["the page: %s steps, status %r, error %r" % (data["steps"], r["status"], r["error"])]
bad += r["console"]
print("  FAIL: " + "; ".join(bad) if bad else "  ok")
sys.exit(1 if bad else 0)
PYEOF
        then ok; else no "the ladder in a worker: $(tail -n 1 "$tmp/train.json")"; fi
    else no "drive.js train: $(tail -n 3 "$tmp/train.err")"; fi
    # stopped at step 4 or after: the model so far, the native one for that many steps
    if drive train "$(realpath "$out/ladder.html")" 2000 4 "$tmp/stop.dom" > "$tmp/stop.json" 2> "$tmp/stop.err"; then
        k=$($PY -c 'import json,sys; print(json.loads(json.load(open(sys.argv[1]))["json"])["steps"])' "$tmp/stop.json")
        if grep -q "stopped: the pictures show the model after $k of 2000 steps" "$tmp/stop.json" && [ "$k" -ge 1 ] &&
            [ "$k" -lt 2000 ]; then ok; echo "  ladder stopped: the model after $k of 2000 steps"
        else no "the ladder's stop: $(head -c 300 "$tmp/stop.json")"; fi
        "$B/ladder" 8 --steps "$k" --json "$tmp/l-stop.json" > /dev/null 2>&1 || no "ladder --steps $k --json failed"
        if $PY "$here/check_live.py" attention "$tmp/stop.dom" "$tmp/l-stop.json" > "$tmp/stop.out"; then
            ok; sed "s/^/  ladder stopped: /" "$tmp/stop.out" | tail -n 2
        else no "ladder stopped: $(tail -n 1 "$tmp/stop.out")"; fi
    else no "drive.js train (stop): $(tail -n 3 "$tmp/stop.err")"; fi
    # the tour's step box typed in: 2.5 is refused beside the box, then 3 takes three steps
    if drive type "$(realpath "$out/backward_tour.html")" live-count 2.5 live-step live-count 3 live-step \
        > "$tmp/box.json" 2> "$tmp/box.err" && $PY - "$tmp/box.json" <<'PYEOF'
import json, sys
r = json.load(open(sys.argv[1]))
a, b = r["after"]
steps = lambda s: json.loads(s["json"])["steps"]
ok = a["messages"][0]["text"] == 'a whole number from 1 to 1000, please (not "2.5")' and steps(a) == 0 and not a["error"] \
    and b["messages"][0]["text"] == "" and steps(b) == 3 and not b["error"] and not r["console"]
print("  the step box: 2.5 -> %r, %d steps; then 3 -> %d steps" % (a["messages"][0]["text"], steps(a), steps(b)))
sys.exit(0 if ok else 1)
PYEOF
    then ok; else no "the tour's step box typed in: $(head -c 300 "$tmp/box.json") $(tail -n 2 "$tmp/box.err")"; fi
    # a run that fails after one that worked (a character the ladder's text never uses): one line, stale pictures
    if drive type "$(realpath "$out/ladder.html")" live-input "We go ✓" live-run > "$tmp/fail.json" 2> "$tmp/fail.err" &&
        $PY - "$tmp/fail.json" <<'PYEOF'
import json, sys
s = json.load(open(sys.argv[1]))["after"][0]
print("  a failed run: %r, stale %s" % (s["error"], s["stale"]))
sys.exit(0 if s["stale"] and s["error"].startswith("ladder failed (status 1): ladder: --input: ") and "\n" not in s["error"] else 1)
PYEOF
    then ok; else no "a failed run in the ladder's page: $(head -c 300 "$tmp/fail.json") $(tail -n 2 "$tmp/fail.err")"; fi
fi

# ---- every page: offline, its size, and screenshots -------------------------------
# (in real time, 5 s each, so that the times the page shows are real: in
# virtual time a run takes 0 ms)
for p in translate gpt backward_tour ladder; do
    offline "$out/$p.html"
    echo "  $p.html: $(wc -c < "$out/$p.html") bytes"
done
# the model at a glance's style and script: on the attention pages, not on the tour's, which draws none
for p in translate gpt ladder; do grep -q 'function drawGlance' "$out/$p.html" || no "$p.html: no glance script"; done
if grep -qE 'function drawGlance|\.ov-svg\{' "$out/backward_tour.html"; then no "backward_tour.html holds the glance's script or style"
else ok; fi
shot "$out/translate.html" "live_input=i%20lost%20.&attn=cross&layer=1&head=1&token=1" "$out/translate-typed.png" --timeout=5000
shot "$out/gpt.html" "live_input=We%20&layer=1&head=0&token=6" "$out/gpt-typed.png" --timeout=5000
shot "$out/backward_tour.html" "live_mask=0,1;3,1" "$out/tour-mask.png" --timeout=5000
shot "$out/backward_tour.html" "live_mask=0,1;3,1&live_steps=5" "$out/tour-steps.png" --timeout=5000

# ---- what the pages say (docs/explorer.md's promises), from what the model is -------
body() { perl -0pe 's{<script.*?</script>}{}gs' "$1"; } # the DOM outside the scripts
says() { # NAME DOM PERL-REGEX...: each found in the DOM outside its scripts
    local name=$1 dom=$2 re
    shift 2
    for re in "$@"; do
        if ! body "$dom" | RE=$re perl -0ne 'exit(/$ENV{RE}/s ? 0 : 1)'; then no "$name: not found: $re"; return; fi
    done
    ok
}
# the encoder has no causal mask: its caption does not say so; the GPT's does
if body "$tmp/translate.dom" | grep -q 'a query never sees a later token'; then
    no "the translator's encoder self-attention is captioned as causal"
else ok; fi
says "the GPT's caption" "$tmp/gpt.dom" 'the causal mask: a query never sees a later token'
# what the program said, first: the translation; the GPT's whole sample, the prompt marked
says "the translation shown" "$tmp/translate.dom" '<p class="said" id="said"><b>translation</b>.*?<span id="said-text">je suis'
says "the GPT's sample shown" "$tmp/gpt.dom" '<mark id="said-prompt">We </mark>'
# a head switched off: marked on its button and its thumbnail
says "the head off marked" "$tmp/gpt-off.dom" '<button id="live-head" class="head-off">head self:0:0 is off: switch it on</button>' \
    'data-pick-head="0"[^>]*class="[^"]*head-off|class="[^"]*head-off[^"]*"[^>]*data-pick-head="0"'
# the tour: dK's and dV's rows are keys; its mask grid names its tokens and has a legend
says "the tour's labels" "$tmp/tour.dom" 'data-name="dK".*?token \(key\)' 'data-name="dV".*?token \(key\)' \
    'id="live-mask-legend"' '<table class="mask" id="live-mask"><tbody><tr><th class="corner">query \\ key</th><th class="col">token 0</th>'
# the tour's edited mask cells, and only they, are framed (red, the page's style)
says "the tour's edited cells framed" "$tmp/tour.dom" '<td class="on edited" data-row="0" data-col="1"' \
    '<td class="off edited" data-row="3" data-col="1"' 'table\.mask td\.edited\{outline:2px solid #d62728\}'
if [ "$(body "$tmp/tour.dom" | grep -o '<td class="o[nf]f\? edited"' | wc -l)" != 2 ]; then
    no "the tour's mask: $(body "$tmp/tour.dom" | grep -o '<td class="o[nf]f\? edited"' | wc -l) cells framed, 2 edited"; fi
# clicked: a row of the heatmap follows that query, a head's thumbnail chooses that head
if clickable && drive click "$(realpath "$out/translate.html")" "live_input=i%20lost%20.&attn=encoder&layer=0&head=0&token=0" \
    '#heatmap tr[data-pick-token="2"]' '[data-pick-head="1"]' > "$tmp/click.json" 2> "$tmp/click.err" &&
    $PY - "$tmp/click.json" <<'PYEOF'
import json, sys
r = json.load(open(sys.argv[1]))
got = [(s.get("token"), s.get("head")) for s in r["after"]]
print("  clicked: a row followed, a head chosen: (token, head) %s" % got)
sys.exit(0 if got == [("2", "0"), ("2", "1")] and not r["console"] else 1)
PYEOF
then ok; else no "clicked: a row followed, a head chosen: $(head -c 300 "$tmp/click.json") $(tail -n 2 "$tmp/click.err")"; fi
# <body> carries the times the page measured, in ms
says "the times the page measured" "$tmp/translate.dom" '<body[^>]* data-live_compile="[0-9.]+"' \
    '<body[^>]* data-live_last_run="[0-9.]+"' '<body[^>]* data-live_ready="[0-9.]+"' '<body[^>]* data-live_done="[0-9.]+"'
# the module named with --wasm FILE: the page holds that file; a missing one is named, no page written
"$B/ladder" 8 --steps 1 --live "$tmp/w.html" --wasm "$B/wasm/ladder.wasm" > /dev/null 2>&1 &&
    "$B/ladder" 8 --steps 1 --live "$tmp/none.html" --wasm "$tmp/none.wasm" > /dev/null 2> "$tmp/w.err"
rc=$?
if [ $rc = 1 ] && [ -s "$tmp/w.html" ] && grep -qF "$tmp/none.wasm" "$tmp/w.err" && [ ! -e "$tmp/none.html" ]; then ok
else no "--wasm FILE: exit $rc, $(head -c 200 "$tmp/w.err")"; fi
# the feed-forward view's count of units above 0 is visible (not font-size 0)
if clickable && drive eval "$(realpath "$out/gpt.html")" "live_input=We%20&view=ffn" \
    '[...document.querySelectorAll("#ffn-map td.after")].map(td => getComputedStyle(td).fontSize)' > "$tmp/ffn.json" 2>&1 &&
    grep -q '"12px"' "$tmp/ffn.json" && ! grep -q '"0px"' "$tmp/ffn.json"; then ok
else no "the FFN view's '> 0' column: $(head -c 200 "$tmp/ffn.json")"; fi

# ---- hostile input is harmless: every text field and URL parameter ----------------
# HTML and script, invalid UTF-8, control characters, an emoji, a 10 KB line: the
# page finishes, nothing is injected (no element of the input's outside the
# scripts), and it shows a result or one line of error
long=$(printf 'a%.0s' $(seq 10240))
hostile=("%3Cimg%20src%3Dx%20onerror%3Dalert(1)%3E%3Cb%3Einjected%3C%2Fb%3E" "%FF%FE%C0%80" "%01%02%1B%5B31m%0D" \
         "%F0%9F%98%80%20ok" "$long")
bad_dom() { body "$1" | grep -Eq '<img src="x"|<b>injected</b>'; }
for p in translate gpt; do
    for h in "${hostile[@]}" ; do
        for q in "live_input=$h" "live_head_off=$h" "sentence=$h&view=$h&attn=$h&layer=$h"; do
            run_page "file://$(realpath "$out/$p.html")?$q" "$tmp/h.log" > "$tmp/h.dom"
            $PY "$here/check_live.py" state "$tmp/h.dom" > "$tmp/h.state"
            if grep -q 'data-live="1"' "$tmp/h.dom" && ! bad_dom "$tmp/h.dom" && [ "$(grep -c '^error=' "$tmp/h.state")" = 1 ] &&
                ! grep -q '^error=".*\\n' "$tmp/h.state"; then :
            else no "$p.html?${q:0:60}: $(head -n 1 "$tmp/h.state" | cut -c1-200)"; continue 3; fi
        done
    done
    ok; echo "  $p.html: 5 hostile inputs x 3 places (the text, --head-off, the view's parameters): nothing injected"
done
run_page "file://$(realpath "$out/backward_tour.html")?live_mask=${hostile[0]}&live_count=${hostile[0]}&live_steps=1" \
    "$tmp/h.log" > "$tmp/h.dom"
$PY "$here/check_live.py" state "$tmp/h.dom" > "$tmp/h.state"
if ! bad_dom "$tmp/h.dom" && grep -q '^error="backward_tour failed (status 2): backward_tour: --mask wants' "$tmp/h.state"
then ok; else no "the tour given HTML: $(head -n 1 "$tmp/h.state" | cut -c1-200)"; fi

# ---- a program that fails in the page: one line, the pictures marked stale ---------
# (and a console error, so that the checks above catch one)
run_page "file://$(realpath "$out/backward_tour.html")?live_mask=9,9" "$tmp/bad.log" > "$tmp/bad.dom"
$PY "$here/check_live.py" state "$tmp/bad.dom" > "$tmp/bad.state"
if grep -q 'CONSOLE.*--mask wants ROW,COL' "$tmp/bad.log" && grep -q '^stale=1$' "$tmp/bad.state" &&
    grep -qx "error=\"backward_tour failed (status 2): backward_tour: --mask wants ROW,COL with both in 0..3, got '9,9'\"" \
        "$tmp/bad.state"
then ok; else no "a program failing in the page: $(tr '\n' ' ' < "$tmp/bad.state" | cut -c1-300)"; fi
finish live
