#!/usr/bin/env bash
# tests/docs/check_op_guide.sh [GUIDE.md]: adds the op of docs/contributing.md
# to a scratch copy of the tree exactly as the guide's code blocks say, and
# checks it (tests/docs/op_guide_check.c): its gradient-check cases, and
# three steps of training with resets, each against finite differences.
# Then it puts in the guide's wrong backward (the block marked WRONG) and
# expects those checks to fail.
#
# The guide marks a piece of the tree by the first line of its ```c block:
#   /* ops/NAME.c: ...                       the whole new file ops/NAME.c
#   /* FILE, above the line with "TEXT" */   lines to insert above the first
#   /* FILE, below the line with "TEXT" */   line of FILE that contains TEXT,
#   /* FILE, in place of the line with "TEXT": WRONG ... */  or in its place
# (a block marked WRONG goes only into the bad variant).  It also checks
# the count the guide gives: three files touched, and besides the op's own
# file three lines.
# Prints what it did and 'op guide: passed' or 'op guide: FAILED' last.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
guide=${1:-docs/contributing.md}
cd "$root" || exit 2
CC=${CC:-cc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "op guide: $*"; echo "op guide: FAILED"; exit 1; }

mkdir -p "$tmp/blocks" "$tmp/tree"
awk -v out="$tmp/blocks" -f "$root/tests/docs/extract.awk" "$guide" || fail "cannot read the blocks of $guide"
cp -r "$root/Makefile" "$root/include" "$root/src" "$root/ops" "$tmp/tree/"

# insert FILE WHERE TEXT BLOCK: BLOCK's lines after its first, at the first
# line of FILE that contains TEXT (above, below, or in its place)
insert() {
    local file=$1 where=$2 text=$3 block=$4
    [ -f "$file" ] || fail "the guide edits $file, which does not exist"
    grep -qF -- "$text" "$file" || fail "no line with \"$text\" in ${file#"$tmp"/tree/}"
    tail -n +3 "$block" > "$tmp/lines"
    awk -v text="$text" -v where="$where" -v lines="$tmp/lines" '
        !done && index($0, text) {
            if (where == "below") print
            while ((getline l < lines) > 0) print l
            if (where == "above") print
            done = 1; next }
        { print }' "$file" > "$file.new" && mv "$file.new" "$file"
}

name="" bad=""
while read -r id line; do
    b="$tmp/blocks/$id.c" first=$(sed -n 2p "$tmp/blocks/$id.c")
    if [[ $first =~ ^/\*\ ops/([a-z_0-9]+)\.c: ]]; then
        name=${BASH_REMATCH[1]}
        tail -n +2 "$b" > "$tmp/tree/ops/$name.c"
        echo "op guide: $guide:$line: the new file ops/$name.c"
    elif [[ $first =~ ^/\*\ ([a-z_/0-9]+\.[ch]),\ (above|below|in\ place\ of)\ the\ line\ with\ \"([^\"]*)\"(.*)$ ]]; then
        file=${BASH_REMATCH[1]} where=${BASH_REMATCH[2]} text=${BASH_REMATCH[3]} rest=${BASH_REMATCH[4]}
        if [[ $rest == *WRONG* ]]; then bad="$b|$file|$text"; continue; fi
        insert "$tmp/tree/$file" "$where" "$text" "$b"
        echo "op guide: $guide:$line: $(($(wc -l < "$b") - 2)) line(s) $where \"$text\" in $file"
    fi
done < "$tmp/blocks/list"
[ -n "$name" ] || fail "the guide has no block that is a new file ops/NAME.c"
[ -n "$bad" ] || fail "the guide has no block marked WRONG"

# the count the guide gives: 3 files, 3 lines besides the op's own file
files=$(cd "$tmp/tree" && for f in ops/*.c include/*.h src/*/*.[ch]; do cmp -s "$f" "$root/$f" 2>/dev/null || echo "$f"; done)
nfiles=$(echo "$files" | wc -l)
nlines=$(for f in $files; do [ "$f" = "ops/$name.c" ] || diff "$root/$f" "$tmp/tree/$f" | grep -c '^>'; done | awk '{ s += $1 } END { print s + 0 }')
echo "op guide: touched $nfiles files ($(echo $files)), $nlines lines besides ops/$name.c"
[ "$nfiles" = 3 ] && [ "$nlines" = 3 ] || fail "the guide says 3 files, 3 lines besides the op's file"

check() { # build the scratch tree's double library and the checker; run it
    make -s -C "$tmp/tree" BUILD=build CC="$CC" CFLAGS=-O1 -j2 build/libattograd64.a > "$tmp/make.log" 2>&1 ||
        { sed 's/^/     /' "$tmp/make.log" | grep -v '^     cc ' | head -n 30; fail "the scratch tree does not build"; }
    "$CC" -std=c11 -Wall -Wextra -Werror -O1 -DAG_DOUBLE -DOP_CALL="ag_$name" -I"$tmp/tree/include" \
        "$root/tests/docs/op_guide_check.c" "$tmp/tree/build/libattograd64.a" -fopenmp -lm -o "$tmp/check" ||
        fail "tests/docs/op_guide_check.c does not build against the scratch tree"
    "$tmp/check" "$name" > "$tmp/check.out" 2>&1
}

if ! check; then sed 's/^/     /' "$tmp/check.out"; fail "$name, built as the guide says, fails its checks"; fi
sed 's/^/     /' "$tmp/check.out"
echo "op guide: $name, as the guide writes it, passes its checks"

IFS='|' read -r b file text <<< "$bad"
insert "$tmp/tree/$file" "in place of" "$text" "$b"
if check; then sed 's/^/     /' "$tmp/check.out"; fail "the guide's WRONG $name passes its checks"; fi
sed 's/^/     /' "$tmp/check.out"
grep -q '^ag_op_check .*: FAIL' "$tmp/check.out" || fail "ag_op_check passed the WRONG $name"
grep -q '^step [23]: .* FAIL' "$tmp/check.out" || fail "training after a reset did not show the WRONG $name's error"
echo "op guide: the WRONG $name fails ag_op_check and, after a reset, its training check"
echo "op guide: passed"
