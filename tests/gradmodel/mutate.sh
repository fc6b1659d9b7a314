#!/bin/bash
# tests/gradmodel/mutate.sh BUILD MODEL [FLAGS...]: the mutation test of
# the whole-model gradient check and its node walk (docs/testing.md).
# MODEL is gpt, translate or classify (BUILD/MODEL64 gradcheck, on
# examples/data/eng-fra.tsv, FLAGS added).  First the model unmutated must
# pass; then for each op on its tape, that op's backward times 1.0001 (a
# relative error of 1e-4) must make the whole-model check fail, and the
# node walk's first failing node must be of that op.  Prints a line per
# mutant and "MODEL: N of M mutants caught and named"; status 1 when any
# is missed or the unmutated model fails.
set -u
B=$1 model=$2
shift 2
bin="$B/${model}64"
data="$(dirname "$0")/../../examples/data/eng-fra.tsv"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
if ! "$bin" gradcheck --data "$data" "$@" > "$out"; then
    cat "$out"
    echo "$model: the unmutated model fails its check"
    exit 1
fi
ops=$(sed -n 's/^ops: //p' "$out" | sed 's/ ([0-9]* nodes)$//; s/ [0-9]*,* */ /g')
caught=0 total=0 missed=""
for op in $ops; do
    total=$((total + 1))
    "$bin" gradcheck --data "$data" "$@" --break "$op" --by 1.0001 > "$out"
    rc=$?
    whole=$(sed -n 's/^whole model: [0-9]* directions, \([0-9]*\) failed.*/\1/p' "$out")
    first=$(sed -n 's/^first failing node: [0-9]* //p' "$out")
    if [ "$rc" = 1 ] && [ "${whole:-0}" -gt 0 ] && [ "$first" = "$op" ]; then
        caught=$((caught + 1))
        echo "$model: $op: caught (${whole} directions fail), named first"
    else
        missed="$missed $op"
        echo "$model: $op: MISSED (status $rc, ${whole:-?} directions fail, first failing node: ${first:-none})"
    fi
done
echo "$model: $caught of $total mutants caught and named${missed:+; missed:$missed}"
[ "$caught" = "$total" ]
