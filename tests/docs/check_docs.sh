#!/usr/bin/env bash
# tests/docs/check_docs.sh BUILD_DIR [FILE.md ...]: every C example of the
# docs compiles against the public headers with -Wall -Wextra -Werror, and
# every complete program runs.  Default files: README.md, docs/*.md,
# examples/README.md.
#
# The convention, for whoever writes a ```c block in those files:
#   - a block with a main() is a complete program: it is compiled, linked
#     with the float library and run; it must exit 0.  A ```output block
#     below it holds its exact standard output, which is compared.  A
#     program whose first line is  /* double */  is built with -DAG_DOUBLE
#     against the double library;
#   - a block whose first line is  /* fragment */  is a run of statements:
#     it is compiled inside  int main(void) { ... }  after the includes of
#     attograd.h, math.h, stdio.h and stdlib.h (its variables must be
#     declared in it);
#   - a block whose first line names a file of the tree (/* ops/NAME.c: ...,
#     /* tests/test_NAME.c: ..., or /* FILE, above|below|in place of the
#     line with "TEXT" */) is a
#     piece of the library: tests/docs/check_op_guide.sh builds it into a
#     copy of the tree (docs/contributing.md's op);
#   - any other block is file-scope code (declarations, functions): it is
#     compiled as a file of its own, with the same includes in front.
# Text that is not C goes in a plain ``` block.
# docs/benchmarks.md stays within 12 KB (12,288 bytes).
# Prints one line per block and 'docs: N passed, N failed' last; exits 1 on a failure.
set -u
B=$(cd "${1:-build}" && pwd)
shift
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 2
files=("$@")
[ ${#files[@]} -gt 0 ] || files=(README.md docs/*.md examples/README.md)
CC=${CC:-cc}
CFLAGS_DOC=(-std=c11 -Wall -Wextra -Werror -O1 -Iinclude)
# a piece of a program may declare what it does not use yet
CFLAGS_PIECE=("${CFLAGS_DOC[@]}" -Wno-unused-function -Wno-unused-variable -Wno-unused-but-set-variable)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
no() { fail=$((fail + 1)); echo "FAIL $1"; }
prelude='#include "attograd.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>'

for md in "${files[@]}"; do
    [ -f "$md" ] || continue
    d="$tmp/$(echo "$md" | tr '/.' '__')"
    mkdir -p "$d"
    if ! awk -v out="$d" -f tests/docs/extract.awk "$md"; then no "$md: bad output block"; continue; fi
    [ -f "$d/list" ] || continue
    while read -r id line; do
        src="$d/$id.c" where="$md:$line"
        if sed -n 2p "$src" | grep -Eq '^/\* ((ops|tests)/[a-z_0-9]+\.c:|[a-z_/0-9]+\.[ch], (above|below|in place of) the line with ")'; then
            ok "$where: a piece of the tree (built by tests/docs/check_op_guide.sh)"
        elif grep -q '^[a-z ]*main *(' "$src"; then
            lib=("$B/libattograd.a")
            if sed -n 2p "$src" | grep -q '^/\* double \*/'; then lib=(-DAG_DOUBLE "$B/libattograd64.a"); fi
            if ! "$CC" "${CFLAGS_DOC[@]}" "$src" "${lib[@]}" -o "$d/$id" ${AG_LDLIBS:--fopenmp -lm} 2> "$d/$id.err"; then
                no "$where: program does not compile:"; sed 's/^/     /' "$d/$id.err" | head -n 20; continue
            fi
            if ! (cd "$d" && "./$id" > "$id.got" 2> "$id.stderr"); then
                no "$where: program exits $?"; head -n 5 "$d/$id.stderr"; continue
            fi
            if [ -f "$d/$id.out" ]; then
                if diff "$d/$id.out" "$d/$id.got" > "$d/$id.diff"; then ok "$where: program runs and prints its output block"
                else no "$where: program's output differs from its output block:"; sed 's/^/     /' "$d/$id.diff"; fi
            else ok "$where: program runs"; fi
        elif sed -n 2p "$src" | grep -q '^/\* fragment \*/'; then
            { echo "$prelude"; echo 'int main(void) {'; cat "$src"; echo 'return 0; }'; } > "$d/$id.w.c"
            if "$CC" "${CFLAGS_PIECE[@]}" -c "$d/$id.w.c" -o "$d/$id.o" 2> "$d/$id.err"; then ok "$where: fragment compiles"
            else no "$where: fragment does not compile:"; sed 's/^/     /' "$d/$id.err" | head -n 20; fi
        else
            { echo "$prelude"; cat "$src"; } > "$d/$id.w.c"
            if "$CC" "${CFLAGS_PIECE[@]}" -c "$d/$id.w.c" -o "$d/$id.o" 2> "$d/$id.err"; then ok "$where: file-scope code compiles"
            else no "$where: file-scope code does not compile:"; sed 's/^/     /' "$d/$id.err" | head -n 20; fi
        fi
    done < "$d/list"
done
# The benchmarks page holds the current results, the machine, the method and
# what did not help: a history of rounds belongs in the commits.
max_bench=12288
if [ -f docs/benchmarks.md ]; then
    size=$(wc -c < docs/benchmarks.md)
    if [ "$size" -le $max_bench ]; then ok "docs/benchmarks.md: $size bytes (at most $max_bench)"
    else no "docs/benchmarks.md: $size bytes, more than $max_bench: keep the current results only"; fi
fi
echo "docs: $pass passed, $fail failed"
[ "$fail" = 0 ] && [ "$pass" -gt 0 ]
