#!/usr/bin/env bash
# tests/classify/test_classify.sh BUILD: the classify example from the
# command line (tests/lib.sh has the helpers).
#   - bad flags and bad data: the exit status and a message naming the problem;
#   - one seed on the shipped data: at least 95% of the held-out sentences
#     right, and the same seed prints the same numbers twice;
#   - docs/classifier.md: its block of attograd's results is what
#     `classify --seeds 3 --quiet` prints now, and its block of the PyTorch
#     twin's is tests/reference/classifier_twin.txt (written by
#     tests/reference/classifier.py; the figures are this machine's kind's:
#     float, the default kernels).
cd "$(dirname "$0")/../.." || exit 2
BIN=$1/classify
TIMEOUT=120
. tests/lib.sh
# The figures the docs quote are training runs: their bits depend on the
# compiler and the CPU's kernels, so they are compared exactly only in the
# reference build (gcc, the default CFLAGS, an AVX-512 CPU: the one that made
# them, as for tests/docs/quotes.pl); elsewhere each line must have the
# quoted line's words, the numbers aside.
exact=0
[ "${2:-}" = --reference ] && grep -qw avx512f /proc/cpuinfo 2>/dev/null && exact=1
shape() { sed -E 's/[0-9]+(\.[0-9]+)?/N/g' "$@"; }
data=examples/data/eng-fra.tsv

usage "an unknown flag" --data "$data" --frobnicate 1
usage "no --data"
run "a missing value" 2 "--steps needs a value" --data "$data" --steps
run "steps not a number" 2 "--steps needs a whole number" --data "$data" --steps ten
run "heads that do not divide" 2 "--hidden 10 is not a multiple of --heads 4" --data "$data" --hidden 10
run "lr out of range" 2 "--lr needs a number" --data "$data" --lr -1
run "a missing file" 1 "$tmp/none.tsv" --data "$tmp/none.tsv"
printf 'Go.\tVa !\nHello.\n' > "$tmp/bad.tsv"
run "a line with one column" 1 "bad.tsv:2: need two tab-separated sentences" --data "$tmp/bad.tsv"
printf 'Go.\tVa !\n' > "$tmp/small.tsv"
run "too few sentences to hold any out" 1 "need at least 10 distinct English ones" --data "$tmp/small.tsv"

run "one seed on the shipped data" 0 "" --data "$data" --quiet
acc=$(sed -n 's/^seed 0: held-out accuracy \([0-9.]*\)%$/\1/p' "$tmp/out")
if [ -n "$acc" ] && awk -v a="$acc" 'BEGIN { exit !(a >= 95) }'; then ok; else no "held-out accuracy '$acc', want >= 95"; fi
cp "$tmp/out" "$tmp/first"
run "the same seed again" 0 "" --data "$data" --quiet
if cmp -s "$tmp/first" "$tmp/out"; then ok; else no "the same seed printed other numbers"; fi

# A ```output block of docs/classifier.md that follows the line holding MARK.
quoted() { awk -v mark="$1" 'index($0, mark) { on = 1; next } on && /^```/ { if (in_block) exit; in_block = 1; next } in_block' docs/classifier.md; }
run "three seeds, as the docs quote" 0 "" --data "$data" --seeds 3 --quiet
if [ $exact = 1 ]; then quoted "classify --data examples/data/eng-fra.tsv --seeds 3 --quiet" > "$tmp/want"; cp "$tmp/out" "$tmp/got"
else quoted "classify --data examples/data/eng-fra.tsv --seeds 3 --quiet" | shape > "$tmp/want"; shape "$tmp/out" > "$tmp/got"; fi
if diff "$tmp/want" "$tmp/got" > "$tmp/diff"; then ok
else no "docs/classifier.md's attograd block is not what the program prints: $(cat "$tmp/diff")"; fi
if diff <(quoted "classifier.py train --seeds 3 --quiet") tests/reference/classifier_twin.txt > "$tmp/diff"; then ok
else no "docs/classifier.md's PyTorch block is not tests/reference/classifier_twin.txt: $(cat "$tmp/diff")"; fi
finish classify
