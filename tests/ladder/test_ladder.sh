#!/usr/bin/env bash
# tests/ladder/test_ladder.sh BUILD: the ladder example from the command line
# (tests/lib.sh has the helpers).
#   - bad flags: exit 2 and a message naming the problem;
#   - Ctrl-C during a page's training: the page's data of the steps taken;
#   - two rungs (5 6): their two rows of the table;
#   - copy and reverse: their attention pictures (--svg), every held-out answer right, and the lines
#     docs/ladder.md quotes are what the program prints;
#   - the explorer page of a rung (--html, --json, --json -): the page holds
#     the data --json writes, stdout holds it alone; refused for two rungs,
#     a rung without attention, a character the text never uses;
#   - every rung: the table docs/ladder.md quotes is what `ladder all`
#     prints, but for its last column, the seconds, which depend on the
#     machine and its load (the bits per character are the same for the
#     same seed, on this machine's kind: float, the default kernels).
cd "$(dirname "$0")/../.." || exit 2
BIN=$1/ladder
TIMEOUT=1800 # every rung: about a minute and a half of one core, far longer on a loaded machine
. tests/lib.sh
# The figures the docs quote are training runs: their bits depend on the
# compiler and the CPU's kernels, so they are compared exactly only in the
# reference build (gcc, the default CFLAGS, an AVX-512 CPU: the one that made
# them, as for tests/docs/quotes.pl); elsewhere each line must have the
# quoted line's words, the numbers aside.
exact=0
[ "${2:-}" = --reference ] && grep -qw avx512f /proc/cpuinfo 2>/dev/null && exact=1
shape() { sed -E 's/[0-9]+(\.[0-9]+)?/N/g' "$@"; }

usage "no rung and no task"
usage "an unknown flag" all --frobnicate
usage "a bad precision" all --precision fp16
usage "a rung out of range" 9
run "a task and rungs" 2 "a task (copy) or rungs, not both" copy 3
run "steps not a number" 2 "--steps needs a whole number" 1 --steps many
run "a missing file" 1 "$tmp/none.tsv" 1 --data "$tmp/none.tsv"

# the explorer page of a rung: the same data in the page, in the file, on stdout
run "a page of two rungs" 2 "--html, --json and --live show one rung" 3 4 --html "$tmp/p.html"
run "a page of a rung without attention" 2 "rung 2 has no attention to show" 2 --steps 2 --html "$tmp/p.html"
if [ -s "$tmp/out" ]; then no "a page of a rung without attention: trained first ($(head -c 200 "$tmp/out"))"; else ok; fi
run "a character the text never uses" 1 "the text never uses the character '~'" 3 --steps 2 --input "a~" --json -
run "--html and --json" 0 "" 8 --steps 5 --input "We go." --html "$tmp/p.html" --json "$tmp/p.json"
run "--json -" 0 "" 8 --steps 5 --input "We go." --json -
if /usr/bin/python3 - "$tmp/p.html" "$tmp/p.json" "$tmp/out" << 'PY'
import json, re, sys
page = re.search(r'<script type="application/json" id="data">(.*?)</script>', open(sys.argv[1]).read(), re.S)
data, out = json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
maps = data["inputs"][0]["maps"]
sys.exit(not (page and json.loads(page.group(1)) == data == out and data["model"] == "ladder" and len(maps) == 2
              and data["inputs"][0]["name"] == "We go." and len(maps[0]["heads"]) == 4))
PY
then ok; else no "ladder --html, --json and --json - do not hold the same data of 2 layers, 4 heads"; fi

# The lines of docs/ladder.md's ```text block that follows the line holding MARK.
quoted() { awk -v mark="$1" 'index($0, mark) { on = 1; next } on && /^```/ { if (in_block) exit; in_block = 1; next } in_block' docs/ladder.md; }
same() { # NAME WANT GOT
    if diff "$2" "$3" > "$tmp/diff"; then ok; else no "$1: docs/ladder.md differs from the program: $(cat "$tmp/diff")"; fi
}
# Ctrl-C (SIGINT or SIGTERM) while a page's rung trains: it stops after the
# step in flight, and the page's data is that of the model after the n steps
# it took, the same as --steps n gives (docs/explorer.md, "The ladder")
for sig in INT TERM; do
    stop_when "$sig" "step 3 of" "$tmp/k_$sig.log" 8 --steps 1000000 --progress --input "We go." --json "$tmp/k_$sig.json"
    n=$(sed -n 's/.*stopped after \([0-9]*\) of 1000000 steps.*/\1/p' "$tmp/k_$sig.log")
    if [ -n "$n" ] && timeout 600 "$BIN" 8 --steps "$n" --input "We go." --json "$tmp/k_n.json" > /dev/null 2>&1 &&
        cmp -s "$tmp/k_$sig.json" "$tmp/k_n.json"; then ok
    else no "a page's training stopped by SIG$sig: exit $stopped_rc, after ${n:-?} steps: $(tail -n 2 "$tmp/k_$sig.log")"; fi
done

# `ladder 5 6` runs two rungs, and only they: two rows of the table
run "ladder 5 6" 0 "" 5 6 --steps 20 --quiet
if [ "$(grep -cE '^\| [0-9] \|' "$tmp/out")" = 2 ] && grep -q '^| 5 | + feed-forward' "$tmp/out" && grep -q '^| 6 | + residual' "$tmp/out"
then ok; else no "ladder 5 6: two rungs: $(cat "$tmp/out")"; fi

# the attention pictures of copy and reverse (--svg PREFIX: PREFIX_layer0.svg, ...)
for task in copy reverse; do
    run "$task" 0 "" $task --quiet --svg "$tmp/ladder_$task"
    if grep -q '<svg' "$tmp/ladder_${task}_layer0.svg" 2> /dev/null; then ok
    else no "the attention pictures of copy and reverse: no $tmp/ladder_${task}_layer0.svg"; fi
    if grep -q "whole answers right 100.00%" "$tmp/out"; then ok; else no "$task: not every answer right: $(cat "$tmp/out")"; fi
    if [ $exact = 1 ]; then same "$task" <(quoted "ladder $task --quiet") "$tmp/out"
    else same "$task" <(quoted "ladder $task --quiet" | shape) <(shape "$tmp/out"); fi
done
no_seconds() { sed -E 's/\| *[0-9.]+ \|$/|/' "$@"; }
run "every rung" 0 "" all --quiet
if [ $exact = 1 ]; then same "the ladder's table" <(quoted "ladder all --quiet" | no_seconds) <(no_seconds "$tmp/out")
else same "the ladder's table" <(quoted "ladder all --quiet" | no_seconds | shape) <(no_seconds "$tmp/out" | shape); fi
finish ladder
