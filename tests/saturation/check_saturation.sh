#!/usr/bin/env bash
# tests/saturation/check_saturation.sh: the tables of docs/translator.md,
# "Cures: pre-norm and QK-norm", are what tests/reference/saturation_table.py
# makes of the committed measurements (tests/reference/saturation/*.json):
# each block from its line "<!-- saturation_table.py NAME -->" to its
# "<!-- end -->" must be the script's, exactly.  Needs python3 (no
# PyTorch); as root on Debian it installs python3 when missing.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 2
py=/usr/bin/python3
if [ ! -x "$py" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null; then
        echo "python3 missing: installing python3 with apt-get"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 > /dev/null || exit 1
    else
        echo "FAIL saturation: /usr/bin/python3 is missing (apt-get install python3)"; exit 1
    fi
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! "$py" tests/reference/saturation_table.py tests/reference/saturation > "$tmp/want" 2> "$tmp/err"; then
    echo "FAIL saturation: saturation_table.py: $(tail -n 1 "$tmp/err")"; exit 1
fi
pass=0 fail=0
for name in $(sed -n 's/^<!-- saturation_table.py \([a-z]*\) -->$/\1/p' "$tmp/want"); do
    block() { awk -v m="<!-- saturation_table.py $name -->" '$0 == m {on = 1} on {print} on && $0 == "<!-- end -->" {exit}' "$1"; }
    block "$tmp/want" > "$tmp/$name.want"
    block docs/translator.md > "$tmp/$name.got"
    if [ ! -s "$tmp/$name.got" ]; then
        fail=$((fail + 1)); echo "FAIL docs/translator.md has no block '<!-- saturation_table.py $name -->'"
    elif diff "$tmp/$name.want" "$tmp/$name.got" > "$tmp/$name.diff"; then
        pass=$((pass + 1)); echo "ok   docs/translator.md: table '$name' is saturation_table.py's"
    else
        fail=$((fail + 1)); echo "FAIL docs/translator.md: table '$name' differs from saturation_table.py's (< script, > docs):"
        sed 's/^/     /' "$tmp/$name.diff" | head -n 20
    fi
done
echo "saturation: $pass passed, $fail failed"
[ "$fail" = 0 ] && [ "$pass" -gt 0 ]
