#!/usr/bin/env bash
# tests/examples/test_examples.sh BUILD_DIR: the example programs as a user
# runs them.
#   - build/gradcheck passes every op in double and exits 0; with one op's
#     backward deliberately broken it reports that op and exits 1, also when
#     broken by only 1e-4 (the strict stage); a NaN summary says nan;
#   - build/attention_demo prints the tutorials' shapes and writes an
#     attention.dot that Graphviz accepts; its --paths table puts one
#     attention node on the default path; its shape walk equals
#     ag_mha_layer_forward; a fully masked row is uniform under -1e9, 0 under -inf;
#     --seed 7 moves the tutorials' weights, not the 4-token example;
#   - build/backward_tour's 16 gradients pass their checks, and with
#     softmax's backward broken the 5 above it fail;
#   - the output that examples/README.md quotes is what they print.
# Prints 'N passed, N failed' last; exits 1 on any failure.
set -u
B=$(cd "${1:-build}" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
no() { fail=$((fail + 1)); echo "FAIL $1"; }

if "$B/gradcheck" > "$tmp/gc.txt" 2>&1 && ! grep -q FAIL "$tmp/gc.txt" && grep -q ' 0 failed' "$tmp/gc.txt"; then
    ok "gradcheck: $(tail -n 1 "$tmp/gc.txt")"
else no "gradcheck did not pass: $(grep FAIL "$tmp/gc.txt" | head -n 3)"; fi

"$B/gradcheck" --break layer_norm > "$tmp/broken.txt" 2>&1
rc=$?
if [ "$rc" = 1 ] && grep -q '^| layer_norm .* FAIL |' "$tmp/broken.txt" && ! grep -q '^| softmax .* FAIL |' "$tmp/broken.txt"
then ok "gradcheck --break layer_norm: exit 1, layer_norm fails, the others pass"
else no "gradcheck --break layer_norm: exit $rc"; fi

# the strict stage sees 1e-4: layer_norm's backward scaled by 1.0001 fails
# every layer_norm case there while passing stage one's 1e-3
"$B/gradcheck" --op layer_norm --break layer_norm --by 1.0001 > "$tmp/strict.txt" 2>&1
rc=$?
if [ "$rc" = 1 ] && [ "$(grep -c '^| layer_norm ' "$tmp/strict.txt")" -gt 0 ] && ! grep -q '^| layer_norm .* pass |' "$tmp/strict.txt"
then ok "gradcheck --break layer_norm --by 1.0001: every layer_norm case fails"
else no "gradcheck --break layer_norm --by 1.0001: exit $rc, $(grep -c ' pass |' "$tmp/strict.txt") cases pass"; fi

# no quiet NaN: with every gradient NaN the summary's worst errors are nan
"$B/gradcheck" --op layer_norm --break layer_norm --by nan > "$tmp/nan.txt" 2>&1
rc=$?
if [ "$rc" = 1 ] && tail -n 1 "$tmp/nan.txt" | grep -q 'worst nan of its tolerance; worst abs error nan, worst rel error nan$'
then ok "gradcheck --by nan: the summary's worst errors are nan"
else no "gradcheck --by nan: exit $rc, '$(tail -n 1 "$tmp/nan.txt")'"; fi

"$B/gradcheck" --op nosuchop > /dev/null 2>&1
rc=$?
if [ "$rc" = 2 ]; then ok "gradcheck --op nosuchop: exit 2"; else no "gradcheck --op nosuchop: exit $rc"; fi

if (cd "$tmp" && "$B/attention_demo" > demo.txt 2>&1); then
    for want in "input shape: [2, 4, 64]" "output shape: [2, 4, 64]" "attention weights shape: [2, 8, 4, 4]" \
                "queries [2, 4, 100], keys/values [2, 6, 100], valid_lens [3, 2]" "output shape: [2, 4, 100]" \
                "causal softmax: the upper triangle is zero [4, 4]"; do
        if grep -qF "$want" "$tmp/demo.txt"; then ok "attention_demo prints '$want'"
        else no "attention_demo does not print '$want'"; fi
    done
    if [ ! -s "$tmp/attention.dot" ]; then no "attention_demo wrote no attention.dot"
    elif ! command -v dot > /dev/null; then ok "attention.dot written (graphviz not installed: not rendered)"
    elif dot -Tsvg "$tmp/attention.dot" -o "$tmp/attention.svg" 2> "$tmp/dot.err"; then ok "dot -Tsvg accepts attention.dot"
    else no "dot rejects attention.dot: $(head -n 3 "$tmp/dot.err")"; fi
    # another seed moves the tutorials' random weights (section 1), not the 4-token example (section 3)
    section() { awk -v n="$1." '/^== / {p = ($2 == n)} p' "$2"; }
    if (cd "$tmp" && "$B/attention_demo" --seed 7 > demo7.txt 2>&1) &&
        ! cmp -s <(section 1 "$tmp/demo.txt") <(section 1 "$tmp/demo7.txt") &&
        [ "$(section 3 "$tmp/demo.txt" | wc -l)" -gt 40 ] && cmp -s <(section 3 "$tmp/demo.txt") <(section 3 "$tmp/demo7.txt")
    then ok "attention_demo --seed 7: the tutorials' weights move, the 4-token example does not"
    else no "attention_demo --seed 7: section 1 unmoved or section 3 moved: $(tail -n 2 "$tmp/demo7.txt")"; fi
else
    no "attention_demo failed: $(tail -n 3 "$tmp/demo.txt")"
fi

# which node runs when (attention_demo --paths, built from real graphs):
# by default one attention node; masked_softmax only when the weights are
# returned or dropped out; the textbook path neither
if "$B/attention_demo" --paths > "$tmp/paths.txt" 2>&1; then
    row() { grep "^| $1 |" "$tmp/paths.txt" | cut -d'|' -f4; }
    if row 'fast, default' | grep -q ' attention,' && ! row 'fast, default' | grep -q masked_softmax &&
        row 'fast, weights returned' | grep -q masked_softmax && row 'fast, dropout' | grep -q 'masked_softmax, dropout' &&
        row 'fast, GPT training' | grep -q 'attention, reshape, linear_add' && row 'cached decoding' | grep -q attention &&
        ! row textbook | grep -q -e attention -e masked_softmax && row textbook | grep -q 'scale, masked_fill, softmax'
    then ok "attention_demo --paths: one attention node by default, masked_softmax with weights or dropout"
    else no "attention_demo --paths: unexpected paths: $(head -n 9 "$tmp/paths.txt" | tr '\n' ' ')"; fi
else no "attention_demo --paths failed: $(tail -n 3 "$tmp/paths.txt")"; fi
if grep -qxF 'y equals ag_mha_layer_forward(x_q, x_kv, mask) within 1e-6: yes' "$tmp/demo.txt" &&
    grep -q '^Q K^T per head: T rows, S columns  \[B, H, T, S\] = \[2, 2, 3, 5\]$' "$tmp/demo.txt"
then ok "attention_demo's shape walk: [B, H, T, S] = [2, 2, 3, 5], equal to ag_mha_layer_forward"
else no "attention_demo's shape walk is not what the tour says"; fi
if grep -q '^fill -1e9 .* weights \[0.2 0.2 0.2 0.2 0.2\]  output 3.0$' "$tmp/demo.txt" &&
    grep -q '^fill -inf .* weights \[0.0 0.0 0.0 0.0 0.0\]  output 0.0$' "$tmp/demo.txt"
then ok "a fully masked row: uniform under -1e9, zeros under -inf"
else no "a fully masked row: not uniform under -1e9 and zero under -inf"; fi

if "$B/backward_tour" > "$tmp/bt.txt" 2>&1 && grep -q '^every gradient matches finite differences' "$tmp/bt.txt" &&
    [ "$(grep -c '  ok$' "$tmp/bt.txt")" = 16 ]
then ok "backward_tour: 16 gradients, each matching finite differences and its formula"
else no "backward_tour failed: $(grep FAIL "$tmp/bt.txt" | head -n 3)"; fi

# a query that may see no key: P's row is 0 (-inf fill), dS's and dQ's rows are 0, every check passes
"$B/backward_tour" --mask 0,0 > "$tmp/bt_row.txt" 2>&1
rc=$?
if [ "$rc" = 0 ] && [ "$(grep -c '  ok$' "$tmp/bt_row.txt")" = 16 ] && grep -q '^  Query 0 may see no key' "$tmp/bt_row.txt" &&
    grep -A2 '^d S + M ' "$tmp/bt_row.txt" | tail -n 1 | grep -Eq '^ +-?0\.00000 +-?0\.00000 +-?0\.00000 +-?0\.00000$' &&
    grep -A2 '^d Q \[' "$tmp/bt_row.txt" | tail -n 1 | grep -Eq '^ +-?0\.00000 +-?0\.00000 +-?0\.00000$'
then ok "backward_tour --mask 0,0: a fully masked row, its dS and dQ rows 0, every check passing"
else no "backward_tour --mask 0,0: exit $rc, $(grep FAIL "$tmp/bt_row.txt" | head -n 2)"; fi

"$B/backward_tour" --break softmax > "$tmp/bt_broken.txt" 2>&1
rc=$?
if [ "$rc" = 1 ] && [ "$(grep -c 'FAIL$' "$tmp/bt_broken.txt")" = 5 ] && grep -A6 '^d V ' "$tmp/bt_broken.txt" | grep -q '  ok$' &&
    head -n 1 "$tmp/bt_broken.txt" | grep -q "^--break softmax: in the finite-difference check only, softmax's backward" &&
    [ "$(grep -c '^  finite differences (broken): ' "$tmp/bt_broken.txt")" = 16 ]
then ok "backward_tour --break softmax: says what it broke; exit 1, the 5 gradients above the softmax fail, dV passes"
else no "backward_tour --break softmax: exit $rc, $(grep -c 'FAIL$' "$tmp/bt_broken.txt") failed"; fi

# precision_tour: ties to even both ways, the top float to inf, and the
# layer norm gains' updates lost in bf16 while fp32 keeps every update
if "$B/precision_tour" > "$tmp/pt.txt" 2>&1 && grep -q '^round[.]tie_even: 1.00390625 -> 1 (0x3f80)$' "$tmp/pt.txt" &&
    grep -q '^round[.]tie_up: 1.01171875 -> 1.015625 (0x3f82)$' "$tmp/pt.txt" &&
    grep -q '^round[.]top: .* -> inf (0x7f80)$' "$tmp/pt.txt" && grep -q '^step[.]lost_fp32: 0[.]0%$' "$tmp/pt.txt" &&
    grep -q '^step[.]gains_lost_bf16: 100[.]0%$' "$tmp/pt.txt"
then ok "precision_tour: bf16's rounding and the updates a bf16 weight loses"
else no "precision_tour: $(head -c 300 "$tmp/pt.txt")"; fi

# The tour quotes the programs' output (examples/README.md, 4-space blocks):
# every quoted tensor title and row must still be printed, word for word.
if [ -s "$tmp/demo.txt" ] && [ -s "$tmp/bt.txt" ]; then
    cat "$tmp/demo.txt" "$tmp/bt.txt" > "$tmp/printed.txt"
    grep -E '^    ( *-?[0-9]+\.[0-9]+)+ *$|^    d .* by ops/|^    [A-Za-z].*\[[0-9, ]+\]$' "$(dirname "$0")/../../examples/README.md" |
        grep -v -e ';' -e '->' | sed 's/^    //' > "$tmp/quoted.txt"
    missing=0 first=
    while IFS= read -r line; do
        if ! grep -qxF -- "$line" "$tmp/printed.txt"; then missing=$((missing + 1)); first=${first:-$line}; fi
    done < "$tmp/quoted.txt"
    n=$(wc -l < "$tmp/quoted.txt")
    if [ "$n" -gt 50 ] && [ "$missing" = 0 ]; then ok "the tour's $n quoted output lines are what the programs print"
    else no "the tour quotes $missing of $n lines the programs no longer print, first: '$first'"; fi
fi

echo "examples: $pass passed, $fail failed"
[ "$fail" = 0 ]
