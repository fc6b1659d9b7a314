#!/bin/bash
# tests/gradmodel/test_gradmodel_cli.sh BUILD: the examples' gradcheck
# command: the classifier passes whole and node by node; layer norm broken
# by 1e-4 fails both, the walk naming it first; the float programs and a
# bad op name say what is wrong.  (The mutation sweep of every op of the
# three models, and the seeds sweep, are make gradmodel-mutate and make
# gradmodel-seeds: minutes.)
B=$1
BIN="$B/classify64"
TIMEOUT=120
. "$(dirname "$0")/../lib.sh"
data="$(dirname "$0")/../../examples/data/eng-fra.tsv"

run "classify64 gradcheck --walk passes" 0 "" gradcheck --data "$data" --walk
if grep -q "^whole model: 4 directions, 0 failed" "$tmp/out" && grep -q "^nodes: [0-9]* checked, 0 failed" "$tmp/out"; then
    ok
else
    no "unbroken: $(cat "$tmp/out")"
fi
run "layer norm broken fails" 1 "" gradcheck --data "$data" --break layer_norm --by 1.0001
if grep -q "^whole model: 4 directions, 4 failed" "$tmp/out" && grep -q "^first failing node: [0-9]* layer_norm$" "$tmp/out" &&
    grep -q "^node [0-9]* layer_norm (blocks.0.norm1) \[.*\]: w . J u off by 1.0e-04" "$tmp/out"; then
    ok
else
    no "layer_norm broken: $(cat "$tmp/out")"
fi
run "an unknown op" 2 "--break: unknown op 'nosuch'" gradcheck --data "$data" --break nosuch
BIN="$B/classify"
run "the float classifier says to use classify64" 2 "gradcheck runs in double: use the program built with libattograd64 (classify64)" gradcheck --data "$data"
BIN="$B/gpt"
run "the float gpt says to use gpt64" 2 "(gpt64)" gradcheck --data "$data"
finish gradmodel
