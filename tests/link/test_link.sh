#!/usr/bin/env bash
# tests/link/test_link.sh BUILD_DIR [CC] [LIBS]: a program compiled without
# -DAG_DOUBLE must not link with libattograd64.a, nor one compiled with it
# with libattograd.a: each ag_real would be read at the wrong width.  The
# linker's message names a symbol that says which precision the program
# was compiled for (ag_graph_new_f32 / ag_graph_new_f64).  The matching
# pairs link and print the right sum.  LIBS: what the library links with
# (the Makefile's LDLIBS: -fopenmp or -pthread, and -lm).
# Prints 'N passed, N failed' last; exits 1 on any failure.
set -u
B=$(cd "${1:-build}" && pwd)
CC=${2:-cc}
LIBS=${3:-${AG_LDLIBS:--fopenmp -lm}}
here=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
no() { fail=$((fail + 1)); echo "FAIL $1"; }

cat > "$tmp/sum.c" <<'C'
#include "attograd.h"
int main(void)
{
    ag_graph *g = ag_graph_new();
    ag_real v[3] = {1, 2, 3};
    ag_tensor *s = ag_sum_all(g, ag_tensor_from(g, AG_SHAPE(3), v));
    printf("%g\n", (double)s->data[0]);
    ag_graph_free(g);
    return 0;
}
C

# link SRC_FLAGS LIB OUT: compile sum.c with the flags, link with LIB
link() {
    $CC -std=c11 -I"$here/include" $1 -c "$tmp/sum.c" -o "$tmp/sum$3.o" &&
        $CC "$tmp/sum$3.o" "$2" -o "$tmp/sum$3" $LIBS > "$tmp/link$3.txt" 2>&1
}

for pair in "f32::$B/libattograd64.a:ag_graph_new_f32" "f64:-DAG_DOUBLE:$B/libattograd.a:ag_graph_new_f64"; do
    IFS=: read -r name flags lib sym <<< "$pair"
    if link "$flags" "$lib" "$name"; then
        no "compiled for $name, linked with $(basename "$lib"): it linked"
    elif grep -q "undefined reference to .$sym" "$tmp/link$name.txt"; then
        ok "compiled for $name, linked with $(basename "$lib"): refused, naming $sym"
    else
        no "compiled for $name, linked with $(basename "$lib"): refused without naming $sym: $(head -c 300 "$tmp/link$name.txt")"
    fi
done

for pair in "f32::$B/libattograd.a" "f64:-DAG_DOUBLE:$B/libattograd64.a"; do
    IFS=: read -r name flags lib <<< "$pair"
    if link "$flags" "$lib" "ok$name" && [ "$("$tmp/sumok$name")" = 6 ]; then
        ok "compiled for $name, linked with $(basename "$lib"): sum(1, 2, 3) = 6"
    else
        no "compiled for $name, linked with $(basename "$lib"): $(head -c 300 "$tmp/linkok$name.txt")"
    fi
done

echo "link: $pass passed, $fail failed"
[ "$fail" = 0 ]
