#!/usr/bin/env bash
# tests/live/test_sampling_page.sh BUILD_DIR: the GPT live page's sampling
# controls (src/viz/sampling_js.c) in headless chromium, against the native
# `gpt sample --json` (check_sampling.py):
#   - asked from the URL for temperature 0.7, top-k 6, top-p 0.8, seed 4
#     and the prompt "We ": the page runs gpt.wasm with those flags and
#     draws the first new character's 12 most probable characters before
#     and after the filters: the native numbers within 1e-5, the page's
#     own JSON exactly, bars as long as their probabilities, the native
#     count of characters kept and the native sample;
#   - asked for a top-p that is markup, a temperature that is a script, a
#     top-k of 10 KB and a seed of control characters, invalid UTF-8 and
#     an emoji: each message beside its box, as text, no run, no element
#     injected, no console error;
#   - typed (tests/live/drive.js): top-p 0 and temperature 1e999 refused
#     beside their boxes with no run, top-k 2.5 refused as not whole, then
#     top-p 0.5 taken: the page's data says 0.5.
# Prints 'N passed, N failed'; exits 1 on a failure.
set -u
B=${1:-build}
BIN=$B/gpt TIMEOUT=120
. "$(dirname "$0")/../lib.sh" # tmp, ok, no, finish
here=$(dirname "$0")
NAME=live-sampling
. "$here/../browser.sh" # need, browse; $PY

head -n 400 examples/data/eng-fra.tsv > "$tmp/train.tsv"
gsmall=(--context 12 --hidden 16 --heads 2 --ffn 32 --layers 2 --batch 8 --steps 40 --eval-every 10)
page=$B/live/gpt_sampling.html
mkdir -p "$B/live"
if "$B/gpt" train --data "$tmp/train.tsv" --out "$tmp/g.safetensors" "${gsmall[@]}" --quiet > "$tmp/g.log" 2>&1 &&
    "$B/gpt" sample --model "$tmp/g.safetensors" --prompt "I " --length 20 --top-p 0.9 --live "$page" \
        > "$tmp/s.log" 2>&1; then ok
else no "gpt --live: $(tail -n 3 "$tmp/g.log" "$tmp/s.log")"; fi

# ---- asked from the URL: the chart against native ------------------------------
"$B/gpt" sample --model "$tmp/g.safetensors" --prompt "We " --length 20 --temperature 0.7 --top-k 6 --top-p 0.8 \
    --seed 4 --json "$tmp/native.json" > /dev/null 2>&1 || no "gpt sample --json failed"
q="live_input=We%20&live_temperature=0.7&live_top_k=6&live_top_p=0.8&live_seed=4"
browse "file://$(realpath "$page")?$q" "$tmp/a.log" --virtual-time-budget=60000 --dump-dom > "$tmp/a.dom"
if grep -q CONSOLE "$tmp/a.log"; then no "console: $(grep CONSOLE "$tmp/a.log" | head -3)"
elif $PY "$here/check_sampling.py" "$tmp/a.dom" "$tmp/native.json" > "$tmp/a.out"; then ok; cat "$tmp/a.out"
else no "the sampling chart: $(tr '\n' ' ' < "$tmp/a.out")"; fi

# ---- a top-p that is markup: a message as text, no run, nothing injected --------
bad="live_top_p=%3Cimg%20src%3Dx%20onerror%3Dalert(1)%3E&live_temperature=%3Cscript%3Ealert(1)%3C%2Fscript%3E"
bad+="&live_top_k=$(head -c 10240 /dev/zero | tr '\0' 7)&live_seed=%01%02%1b%FF%FE%F0%9F%98%80"
browse "file://$(realpath "$page")?live_input=We%20&$bad" "$tmp/b.log" --virtual-time-budget=60000 \
    --dump-dom > "$tmp/b.dom"
if grep -q CONSOLE "$tmp/b.log"; then no "hostile boxes: console: $(grep CONSOLE "$tmp/b.log" | head -3)"
elif $PY "$here/check_sampling.py" "$tmp/b.dom" "$tmp/native.json" bad > "$tmp/b.out"; then ok; cat "$tmp/b.out"
else no "hostile boxes: $(tr '\n' ' ' < "$tmp/b.out")"; fi

# ---- typed: bad values refused beside their boxes, then a good one taken ---------
if clicker; then
    if NODE_PATH="$B/node/node_modules" node "$here/drive.js" type "$(realpath "$page")" sampling-top_p 0 live-run \
        sampling-temperature 1e999 live-run sampling-top_k 2.5 live-run sampling-temperature 1 live-run \
        sampling-top_k 0 live-run sampling-top_p 0.5 live-run > "$tmp/typed.json" 2> "$tmp/typed.err" &&
        $PY - "$tmp/typed.json" <<'PYEOF'
import json, sys
r = json.load(open(sys.argv[1]))
msg = lambda s, k: next((m["text"] for m in s["messages"] if m["id"] == "sampling-%s-msg" % k), None)
top_p = lambda s: json.loads(s["json"])["inputs"][0]["sampling"]["top_p"] if s["json"].strip() else None
a = r["after"]
want = [("top_p", 'a number above 0 and at most 1, please (not "0")'), ("temperature", 'a number from 0 to 100, please (not "1e999")'),
        ("top_k", 'a whole number from 0 to 256, please (not "2.5")')]
bad = ["after step %d: %s says %r, want %r" % (i, k, msg(a[i], k), w) for i, (k, w) in enumerate(want) if msg(a[i], k) != w]
bad += ["a run with a bad box" for s in a[:5] if s["json"].strip()]
bad += [] if top_p(a[5]) == 0.5 and not any(m["text"] for m in a[5]["messages"]) and not a[5]["error"] else \
    ["top-p 0.5 not taken: %r, messages %s" % (top_p(a[5]), a[5]["messages"])]
bad += r["console"]
print("  typed: %s; then top-p 0.5 -> the page's data says top_p %r" % ([msg(a[i], k) for i, (k, _) in enumerate(want)], top_p(a[5])))
print("FAIL: " + "; ".join(bad) if bad else "ok")
sys.exit(1 if bad else 0)
PYEOF
    then ok; else no "typed: $(tail -n 2 "$tmp/typed.json" "$tmp/typed.err" | head -c 600)"; fi
else no "puppeteer-core is missing ($B/node/node_modules: make live-test installs it): the boxes are not typed into"; fi
finish live-sampling
