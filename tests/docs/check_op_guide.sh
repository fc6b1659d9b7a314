#!/usr/bin/env bash
# tests/docs/check_op_guide.sh [GUIDE.md]: a contributor adds the op of
# docs/contributing.md to a scratch copy of the tree, doing exactly what
# the guide says, and the tree then passes; the guide's wrong backward
# then fails.  The steps:
#
#   1. every block of the guide that names a file goes into the copy;
#   2. the guide's steps: make check-op OP=NAME, then make docs;
#   3. the files now different from the tree's are exactly the rows of the
#      guide's table (its first table after "## Adding an op");
#   4. make test, over the suites that can see an op (below, SUITES: the
#      build, both Criterion suites, whose walks of the op table include
#      the gradient checks, the error walk and the kernels against their
#      references, the docs' examples and quotes, the examples, the layers'
#      includes, the headers);
#   5. tests/docs/op_guide_check.c: ag_op_check in both kernel modes and
#      three steps of training with resets, each against finite
#      differences;
#   6. the block marked WRONG in its place: make check-op and step 5 must
#      fail.
#
# The guide marks a piece of the tree by the first line of its block:
#   /* ops/NAME.c: ...   or   /* tests/test_NAME.c: ...   a whole new file
#   /* FILE, above the line with "TEXT" */    lines to insert above the
#   /* FILE, below the line with "TEXT" */    first line of FILE that holds
#   /* FILE, in place of the line with "TEXT": WRONG ... */   TEXT, or in
#                                             its place (WRONG: step 6 only)
# in ```c blocks, and <!-- FILE, below the line with "TEXT" --> in ```markdown
# blocks (docs/ops.md's row, the changelog's line).  A tree that already
# has an op of the guide's name (ops/NAME.c: a contributor followed the
# guide) gets the guide's op again as NAME_again.
#
# The copy is built with CFLAGS=-O1 (not the reference build of the docs'
# quotes: training runs are not made, and a quote's build-dependent
# digits keep the reference's).  Prints what it did, each step's seconds,
# and 'op guide: passed' or 'op guide: FAILED' last.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
guide=${1:-docs/contributing.md}
cd "$root" || exit 2
CC=${CC:-cc}
SUITES="all criterion-f64 criterion-f32 docs-test examples-test layers-test headers-test"
unset MAKEFLAGS MFLAGS MAKELEVEL MAKEOVERRIDES # the copy is a make of its own
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "op guide: $*"; echo "op guide: FAILED"; exit 1; }
t0=$SECONDS
took() { echo "op guide: $1 ($((SECONDS - t0)) s)"; t0=$SECONDS; }

# ---- the copy: the tree's files (git's list when there is one), no build --
mkdir -p "$tmp/blocks" "$tmp/tree"
if git rev-parse --is-inside-work-tree > /dev/null 2>&1; then
    git ls-files -z --cached --others --exclude-standard |
        while IFS= read -r -d '' f; do [ -f "$f" ] && printf '%s\0' "$f"; done |
        xargs -0 cp --parents -t "$tmp/tree" || fail "cannot copy the tree"
else
    cp -r . "$tmp/tree" && rm -rf "$tmp/tree"/build "$tmp/tree"/build-* || fail "cannot copy the tree"
fi
cp -r "$tmp/tree" "$tmp/orig" # the tree as it was, for step 3
awk -v out="$tmp/blocks" -f "$root/tests/docs/extract.awk" "$guide" || fail "cannot read the blocks of $guide"

# the op's name, from the block that is its new file; NAME_again when the
# tree has it already
name=$(for b in "$tmp"/blocks/*.c; do sed -n 2p "$b"; done |
    sed -n 's#^/\* ops/\([a-z_0-9]*\)\.c:.*#\1#p' | head -n 1)
[ -n "$name" ] || fail "the guide has no block that is a new file ops/NAME.c"
if [ -e "ops/$name.c" ]; then
    upper=$(echo "$name" | tr a-z A-Z)
    sed -i -e "s/$name/${name}_again/g" -e "s/$upper/${upper}_AGAIN/g" "$tmp"/blocks/*.c "$tmp"/blocks/*.md 2> /dev/null
    echo "op guide: the tree has ops/$name.c already: the guide's op goes in again as ${name}_again"
    name=${name}_again
fi

# insert FILE WHERE TEXT BLOCK: BLOCK's lines after its first two, at the
# first line of FILE that holds TEXT (above, below, or in its place)
insert() {
    local file=$1 where=$2 text=$3 block=$4
    [ -f "$file" ] || fail "the guide edits ${file#"$tmp"/tree/}, which does not exist"
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

# ---- 1. the guide's blocks ----------------------------------------------
bad=""
place='(above|below|in place of) the line with "([^"]*)"(.*)$'
while read -r id line; do
    b="$tmp/blocks/$id.c" first=$(sed -n 2p "$tmp/blocks/$id.c")
    if [[ $first =~ ^/\*\ ((ops|tests)/[a-z_0-9]+\.c): ]]; then
        file=${BASH_REMATCH[1]}
        tail -n +2 "$b" > "$tmp/tree/$file"
        echo "op guide: $guide:$line: the new file $file"
    elif [[ $first =~ ^/\*\ ([a-z_/0-9]+\.[ch]),\ $place ]]; then
        file=${BASH_REMATCH[1]} where=${BASH_REMATCH[2]} text=${BASH_REMATCH[3]} rest=${BASH_REMATCH[4]}
        if [[ $rest == *WRONG* ]]; then bad="$b|$file|$text"; continue; fi
        insert "$tmp/tree/$file" "$where" "$text" "$b"
        echo "op guide: $guide:$line: $(($(wc -l < "$b") - 2)) line(s) $where \"$text\" in $file"
    fi
done < "$tmp/blocks/list"
[ -n "$bad" ] || fail "the guide has no block marked WRONG"
while read -r id line; do
    b="$tmp/blocks/$id.md" first=$(sed -n 2p "$tmp/blocks/$id.md")
    if [[ $first =~ ^\<\!--\ ([A-Za-z_/0-9]+\.md),\ $place ]]; then
        file=${BASH_REMATCH[1]} where=${BASH_REMATCH[2]} text=${BASH_REMATCH[3]}
        insert "$tmp/tree/$file" "$where" "$text" "$b"
        echo "op guide: $guide:$line: $(($(wc -l < "$b") - 2)) line(s) $where \"$text\" in $file"
    fi
done < <(cat "$tmp/blocks/mdlist" 2> /dev/null)
took "the guide's blocks are in"

# ---- 2. the guide's steps -------------------------------------------------
mk() { make -C "$tmp/tree" --no-print-directory BUILD=build CC="$CC" CFLAGS=-O1 -j2 "$@"; }
step() { # step LOG ARGS...: make ARGS, its log's last lines when it fails
    local log=$1
    shift
    if ! mk "$@" > "$tmp/$log" 2>&1; then
        grep -v "^$CC \|^cc \|^ar " "$tmp/$log" | tail -n 30 | sed 's/^/     /'
        return 1
    fi
}
step check-op.log check-op OP="$name" || fail "make check-op OP=$name fails"
grep '^check-op: \|^[0-9]* cases\|^float\|Synthesis' "$tmp/check-op.log" | sed 's/^/     /'
took "make check-op OP=$name passes"
step docs.log docs || fail "make docs fails"
grep '^wrote \|^quotes: ' "$tmp/docs.log" | sed 's/^/     /'
took "make docs passes"

# ---- 3. the files touched: the guide's table ------------------------------
touched=$(cd "$tmp/tree" && find . -path ./build -prune -o -type f -print | sed 's#^\./##' | sort |
    while read -r f; do cmp -s "$f" "$tmp/orig/$f" 2> /dev/null || echo "$f"; done)
listed=$(awk '/^## Adding an op/ {p = 1; next} p && /^#/ {exit} p && /^\| `[^`]+` \|/ {split($0, a, "`"); print a[2]}' \
    "$guide" | sed "s/<name>/$name/g" | sort)
echo "op guide: touched $(echo $touched)"
[ "$touched" = "$listed" ] ||
    fail "the guide's table lists $(echo $listed); the steps touched $(echo $touched)"
took "the files touched are the guide's table"

# ---- 4. make test over the suites that can see an op ----------------------
if ! step test.log test TEST_SUITES="$SUITES"; then fail "make test fails in the copy ($SUITES)"; fi
tail -n 1 "$tmp/test.log" | sed 's/^/     /'
took "make test passes ($SUITES)"

# ---- 5 and 6: finite differences across resets; the WRONG backward --------
check() { # build the copy's double library and the checker; run it
    step lib.log build/libattograd64.a || fail "the copy does not build"
    "$CC" -std=c11 -Wall -Wextra -Werror -O1 -DAG_DOUBLE -DOP_CALL="ag_$name" -I"$tmp/tree/include" \
        "$root/tests/docs/op_guide_check.c" "$tmp/tree/build/libattograd64.a" ${AG_LDLIBS:--fopenmp -lm} -o "$tmp/check" ||
        fail "tests/docs/op_guide_check.c does not build against the copy"
    "$tmp/check" "$name" > "$tmp/check.out" 2>&1
}
if ! check; then sed 's/^/     /' "$tmp/check.out"; fail "$name, built as the guide says, fails its checks"; fi
sed 's/^/     /' "$tmp/check.out"
took "$name, as the guide writes it, passes ag_op_check and training with resets"

IFS='|' read -r b file text <<< "$bad"
insert "$tmp/tree/$file" "in place of" "$text" "$b"
if check; then sed 's/^/     /' "$tmp/check.out"; fail "the guide's WRONG $name passes its checks"; fi
sed 's/^/     /' "$tmp/check.out"
grep -q '^ag_op_check .*: FAIL' "$tmp/check.out" || fail "ag_op_check passed the WRONG $name"
grep -q '^step [23]: .* FAIL' "$tmp/check.out" || fail "training after a reset did not show the WRONG $name's error"
if mk check-op OP="$name" > "$tmp/check-op-bad.log" 2>&1; then fail "make check-op passed the WRONG $name"; fi
grep -m 3 'FAIL\|failed' "$tmp/check-op-bad.log" | sed 's/^/     /'
took "the WRONG $name fails make check-op, ag_op_check and, after a reset, its training check"
echo "op guide: passed"
