#!/usr/bin/env bash
# tests/check_op/test_op_list.sh [CC]: the contributor's net holds where
# docs/contributing.md says it does, tried on copies of the header:
#   1. the list AG_OPS (include/attograd_core.h) makes both the enum and the
#      op table: deleting an op's line (softmax's, and the last one) fails
#      the build of that op's file with an error that names its id;
#   2. a call to an op that was never declared fails the build (the
#      Makefile's AG_FLAGS have -Werror=implicit-function-declaration):
#      without it the call compiles, its pointer is cut to an int, and the
#      tests crash;
#   3. the unchanged header compiles the same files (the two failures are
#      the deletions', not the set-up's).
# Prints a line per check and 'op list: passed' or 'op list: FAILED' last.
set -u
cd "$(dirname "$0")/../.." || exit 2
CC=${1:-${CC:-cc}}
flags=$(make -s --no-print-directory print-ag-flags) || { echo "op list: cannot read AG_FLAGS"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; failed=1; }

# DIR (a copy of attograd_core.h) is searched before include/
compile() { # compile DIR FILE: 0 when it compiles; the messages in $tmp/log
    # shellcheck disable=SC2086
    $CC -I"$1" $flags -c "$2" -o "$tmp/out.o" > "$tmp/log" 2>&1
}
mkdir -p "$tmp/same" "$tmp/cut"
cp include/attograd_core.h "$tmp/same/"
# softmax's line, and the last of the list (above "the end of the list")
last=$(grep -B 1 'the end of the list' include/attograd_core.h | sed -n 's/^ *X(\([a-z_0-9]*\), .*/\1/p')
[ -n "$last" ] || bad "no line X(...) above \"the end of the list\" in include/attograd_core.h"
for op in softmax $last; do
    id=$(echo "$op" | tr a-z A-Z)
    compile "$tmp/same" "ops/$op.c" || { bad "ops/$op.c does not compile with the header as it is"; sed 's/^/     /' "$tmp/log"; continue; }
    grep -v "^ *X($op, $id) \\\\\$" include/attograd_core.h > "$tmp/cut/attograd_core.h"
    if cmp -s include/attograd_core.h "$tmp/cut/attograd_core.h"; then bad "no line X($op, $id) in AG_OPS"; continue; fi
    if compile "$tmp/cut" "ops/$op.c"; then
        bad "ops/$op.c compiles without its line X($op, $id) in AG_OPS"
    elif grep -q "AG_OP_$id" "$tmp/log"; then
        ok "without its line X($op, $id), ops/$op.c does not compile: $(grep -m 1 "AG_OP_$id" "$tmp/log" | sed 's/^[^ ]* //')"
    else
        bad "without X($op, $id), ops/$op.c fails to compile, but no message names AG_OP_$id"
        sed 's/^/     /' "$tmp/log"
    fi
done

printf '#include "attograd.h"\nag_tensor *f(ag_graph *g, ag_tensor *x);\nag_tensor *f(ag_graph *g, ag_tensor *x) { return %s(g, x); }\n' \
    ag_softmax > "$tmp/declared.c"
sed 's/ag_softmax/ag_never_declared/' "$tmp/declared.c" > "$tmp/undeclared.c"
if ! compile include "$tmp/declared.c"; then
    bad "a call to a declared op does not compile"; sed 's/^/     /' "$tmp/log"
elif compile include "$tmp/undeclared.c"; then
    bad "a call to an op never declared compiles (AG_FLAGS: $flags)"
else
    ok "a call to an op never declared does not compile: $(grep -m 1 'implicit' "$tmp/log" | sed 's/^[^ ]* //')"
fi
[ $failed = 0 ] && echo "op list: passed" || echo "op list: FAILED"
exit $failed
