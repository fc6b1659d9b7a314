#!/usr/bin/env bash
# tests/exercises/test_exercises.sh BUILD: every exercise's stub fails its
# check, and its answer in docs/answers.md (the ```c block after the line
# "<!-- answer NN_name.c -->") passes it.  Each answer is compiled in place
# of its stub, after the stub's #include "exercises.h", with -Werror.
cd "$(dirname "$0")/../.." || exit 2
B=$1
CC=${CC:-cc}
FLAGS=(-std=c11 -Wall -Wextra -Werror -O1 -DAG_DOUBLE -Iinclude -Iexamples/exercises)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
no() { fail=$((fail + 1)); echo "FAIL $1"; }

stubs=(examples/exercises/[0-9][0-9]_*.c)
[ ${#stubs[@]} = 10 ] || no "10 exercise files, found ${#stubs[@]}"
for f in "${stubs[@]}"; do
    name=$(basename "$f")
    "$CC" "${FLAGS[@]}" -c "$f" -o "$tmp/stub_${name%.c}.o" 2> "$tmp/err" || no "$name: the stub does not compile: $(cat "$tmp/err")"
    { echo '#include "exercises.h"'; echo '#include <math.h>'; echo '#include <stdlib.h>'
      awk -v mark="<!-- answer $name -->" 'index($0, mark) { on = 1; next } on && /^```c/ { inb = 1; next } inb && /^```/ { exit } inb' docs/answers.md
    } > "$tmp/answer_$name"
    [ "$(wc -l < "$tmp/answer_$name")" -gt 3 ] || no "$name: no answer in docs/answers.md"
    "$CC" "${FLAGS[@]}" -c "$tmp/answer_$name" -o "$tmp/answer_${name%.c}.o" 2> "$tmp/err" ||
        no "$name: the answer does not compile: $(cat "$tmp/err")"
done
link() { # OUT, then the objects
    local out=$1; shift
    "$CC" "$B/f64/tests/exercises/check.o" "$@" "$B/libattograd64.a" -o "$out" -fopenmp -lm 2> "$tmp/err" ||
        { no "linking $out: $(cat "$tmp/err")"; return 1; }
}
if link "$tmp/stubs" "$tmp"/stub_*.o && link "$tmp/answers" "$tmp"/answer_*.o; then
    for n in $(seq 1 10); do
        if "$tmp/stubs" "$n" > "$tmp/out" 2>&1; then no "exercise $n: the stub passes its check"
        elif grep -q "exercise $n: not yet" "$tmp/out"; then ok "exercise $n: the stub fails ($(grep -m1 wrong: "$tmp/out" | sed 's/^ *//'))"
        else no "exercise $n: the stub's check crashed or said nothing: $(tail -n 3 "$tmp/out")"; fi
        if "$tmp/answers" "$n" > "$tmp/out" 2>&1; then ok "exercise $n: the answer passes"
        else no "exercise $n: the answer fails: $(cat "$tmp/out")"; fi
    done
fi
echo "exercises: $pass passed, $fail failed"
[ "$fail" = 0 ]
