#!/usr/bin/env bash
# tests/pictures/check_live_pictures.sh MADE_DIR PICTURES_DIR: the live
# pages' screenshots that make_live_pictures.sh made now (MADE_DIR) against
# the committed ones.  A PNG from chromium is not the same file twice (a
# border's anti-aliasing may move), so each is compared by its pixels, and
# by what it shows:
#   - its numbers: the sha256 of the JSON its page computed (WebAssembly,
#     the same bits on every machine) must be the committed one;
#   - its pixels, when the browser is the version that took the committed
#     ones (another version draws text otherwise): at most 16 pixels may
#     differ by more than 10% (one digit changed is hundreds);
#   - it is not blank: more than 32 colours, not one flat colour;
# and the pixel check can fail: the mask edit and the training step, two
# pictures of the same page, differ by more than 16 pixels.
# Prints one line per check, ok or FAIL, as check_pictures.sh reads them.
set -u
made=$1 pics=$2
MAX_PIXELS=16
differ() { compare -metric AE -fuzz 10% "$1" "$2" null: 2>&1 | cut -d' ' -f1; }
if ! command -v compare > /dev/null || ! command -v identify > /dev/null; then
    echo "FAIL ImageMagick's compare and identify are missing (make test installs them; sudo apt-get install imagemagick): the live pictures are not compared"
    exit 0
fi
browser() { grep '^browser ' "$1/live_pictures.txt" 2> /dev/null; }
same_browser=0
[ "$(browser "$made")" = "$(browser "$pics")" ] && same_browser=1
for png in "$made"/live_*.png; do
    name=$(basename "$png")
    want=$(grep "^$name " "$pics/live_pictures.txt" 2> /dev/null)
    if [ ! -f "$pics/$name" ] || [ -z "$want" ]; then
        echo "FAIL $name is made by make pictures but not committed in examples/pictures"
        continue
    fi
    if [ "$want" = "$(grep "^$name " "$made/live_pictures.txt")" ]; then echo "ok   $name shows the numbers the page computes now"
    else echo "FAIL $name is stale: its page computes other numbers now: run  make pictures"; fi
    stats=$(identify -format '%k %[fx:standard_deviation]' "$png" 2> /dev/null)
    if awk -v s="$stats" 'BEGIN { split(s, a, " "); exit !(a[1] > 32 && a[2] > 0.05) }'; then
        echo "ok   $name is not blank ($stats: colours, standard deviation)"
    else echo "FAIL $name is blank or nearly ($stats: colours, standard deviation)"; fi
    if [ $same_browser = 0 ]; then
        echo "ok   $name: taken by another browser than the committed one (its numbers are compared)"
    else
        n=$(differ "$png" "$pics/$name")
        if [ "${n:-x}" -le $MAX_PIXELS ] 2> /dev/null; then echo "ok   $name is up to date ($n pixels differ)"
        else echo "FAIL $name is stale: ${n:-?} pixels differ from the committed one: run  make pictures"; fi
    fi
done
n=$(differ "$made/live_mask.png" "$made/live_step.png")
if [ "${n:-0}" -gt $MAX_PIXELS ] 2> /dev/null; then echo "ok   the pixel check tells two pictures of one page apart ($n pixels)"
else echo "FAIL the pixel check finds live_mask.png and live_step.png alike (${n:-?} pixels)"; fi
