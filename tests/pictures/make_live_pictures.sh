#!/usr/bin/env bash
# tests/pictures/make_live_pictures.sh BUILD_DIR OUT_DIR: the screenshots of
# the live pages (docs/explorer.md) into OUT_DIR, made by Debian's chromium,
# headless, at 1000 x 1100 pixels:
#   live_typed.png   the translator's page, "i lost ." typed: its
#                    cross-attention, layer 1, head 1, query 1, and its
#                    lines between tokens (the overview hidden: glance=hide)
#   live_overview.png  the same page as it opens: the model at a glance
#   live_model_view.png  the same with head cross:1:0 switched off in the
#                    page: every head as a thumbnail, that one marked off
#   live_gpt_overview.png  the GPT's page (a small GPT, trained as the
#                    translator is), "We " typed: its overview
#   live_mask.png    the backward tour's page, two cells of the mask flipped
#                    (query 0 may see key 1, query 3 may not)
#   live_step.png    the same, then five training steps taken in the page
#   live_sampling.png  the GPT's page (a small model trained as the
#                    translator is), the prompt "We " sampled at temperature
#                    0.7, top-k 6, top-p 0.8, seed 4: the sampling controls and
#                    the first new character's distribution before and after
#   live_pictures.txt  the browser's version, and each picture's numbers
#                    (the sha256 of the JSON its page computed and drew)
# Every number they show is computed by WebAssembly (make wasm), which
# rounds alike on every machine: the page's runs, and the translator's
# training too (a small model, as tests/live/test_live.sh trains, run by
# node as a WASI command: wasi_run.js).  The pages are asked not to show
# their times (live_still=1).  chromium and node are installed with apt-get
# when missing (as root), else nothing is made (a note says so, and
# check_pictures.sh then compares no live picture).  Exits non-zero when
# something fails.
set -eu
B=$(cd "$1" && pwd)
mkdir -p "$2"
out=$(cd "$2" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for c in chromium:chromium node:nodejs; do
    command -v "${c%%:*}" > /dev/null && continue
    if [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${c#*:}" > /dev/null
    else echo "note: ${c%%:*} is missing (sudo apt-get install ${c#*:}): the live pictures are not made" >&2; exit 0; fi
done

# A screenshot of PAGE?QUERY once its runs are done (virtual time lets the
# page's compile, instantiate and runs go to their end first), and a line of
# live_pictures.txt: the picture's name and the sha256 of the JSON the page
# computed and drew (its #live-json, from a second run that dumps the DOM).
chrome() {
    timeout 300 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync --disable-extensions \
        --proxy-server=127.0.0.1:9 --user-data-dir="$tmp/profile" --hide-scrollbars --force-device-scale-factor=1 \
        --window-size=1000,1100 --virtual-time-budget=60000 "$@" 2> "$tmp/chromium.log"
}
shot() {
    local url="file://$(realpath "$1")?live_still=1&$2" png=$out/$3
    chrome --screenshot="$png" "$url" > /dev/null
    [ -s "$png" ] || { echo "no screenshot of $1: $(tail -n 3 "$tmp/chromium.log")" >&2; exit 1; }
    chrome --dump-dom "$url" > "$tmp/dom"
    perl -0ne 'print $1 if m{<pre id="live-json" hidden="">(.+?)</pre>}s' "$tmp/dom" > "$tmp/json"
    [ -s "$tmp/json" ] || { echo "$1?$2: the page computed nothing" >&2; exit 1; }
    echo "$3 $(sha256sum < "$tmp/json" | cut -c1-64)" >> "$out/live_pictures.txt"
}

head -n 400 "$root/examples/data/eng-fra.tsv" > "$tmp/train.tsv"
node --no-warnings "$here/wasi_run.js" "$B/wasm/translate.wasm" "$tmp" train --data /train.tsv --out /t.safetensors \
    --epochs 6 --hidden 16 --heads 2 --ffn 32 --layers 2 --batch 16 --seed 3 --optimizer adam --lr 0.01 --quiet
"$B/translate" run --model "$tmp/t.safetensors" --live "$tmp/translate.html" "go ." > /dev/null
"$B/backward_tour" --live "$tmp/tour.html" > /dev/null
{
    echo "# the live pages' screenshots (tests/pictures/make_live_pictures.sh): the browser that took"
    echo "# them, and for each the sha256 of the JSON the page computed and drew"
    echo "browser $(chromium --version 2> /dev/null | tr -s ' ' | sed 's/ *$//')"
} > "$out/live_pictures.txt"
shot "$tmp/translate.html" "live_input=i%20lost%20.&attn=cross&layer=1&head=1&token=1&glance=hide" live_typed.png
shot "$tmp/translate.html" "live_input=i%20lost%20.&attn=cross&layer=1&head=1&token=1" live_overview.png
shot "$tmp/translate.html" "live_input=i%20lost%20.&live_head_off=cross:1:0&attn=cross&layer=1&head=1&glance=model" \
    live_model_view.png
shot "$tmp/tour.html" "live_mask=0,1;3,1" live_mask.png
shot "$tmp/tour.html" "live_mask=0,1;3,1&live_steps=5" live_step.png
node --no-warnings "$here/wasi_run.js" "$B/wasm/gpt.wasm" "$tmp" train --data /train.tsv --out /g.safetensors \
    --context 32 --hidden 16 --heads 2 --ffn 32 --layers 2 --batch 8 --steps 40 --eval-every 10 --quiet
"$B/gpt" sample --model "$tmp/g.safetensors" --prompt "I " --length 40 --seed 1 --live "$tmp/gpt.html" > /dev/null
shot "$tmp/gpt.html" "live_input=We%20&layer=1&head=0&token=2" live_gpt_overview.png
shot "$tmp/gpt.html" "live_input=We%20&live_temperature=0.7&live_top_k=6&live_top_p=0.8&live_seed=4&glance=hide" \
    live_sampling.png
