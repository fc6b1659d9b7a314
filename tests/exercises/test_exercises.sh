#!/usr/bin/env bash
# tests/exercises/test_exercises.sh BUILD: every exercise's stub fails its
# check, and its answer in docs/answers.md (the ```c block after the line
# "<!-- answer NN_name.c -->") passes it.  Each answer is compiled in place
# of its stub, after the stub's #include "exercises.h", with -Werror.
# Then each typical mistake of tests/exercises/mistakes.txt is put into its
# answer, and the checker must fail it and say what the table says: which
# outputs are right, which wrong, where, and the hint.  docs/start.md
# lists every exercise.
cd "$(dirname "$0")/../.." || exit 2
B=$1
CC=${CC:-cc}
LEARNER_FLAGS=(-std=c11 -O1 -DAG_DOUBLE -Iinclude -Iexamples/exercises)
FLAGS=("${LEARNER_FLAGS[@]}" -Wall -Wextra -Werror)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
no() { fail=$((fail + 1)); echo "FAIL $1"; }

answer() { # the answer to stub $1, as a file to compile in its place
    { echo '#include "exercises.h"'; echo '#include <math.h>'; echo '#include <stdlib.h>'
      awk -v mark="<!-- answer $1 -->" 'index($0, mark) { on = 1; next } on && /^```c/ { inb = 1; next } inb && /^```/ { exit } inb' docs/answers.md
    }
}
stubs=(examples/exercises/[0-9][0-9]_*.c)
count=${#stubs[@]}
answers=$(grep -c '^<!-- answer [0-9][0-9]_.*\.c -->$' docs/answers.md)
[ "$answers" = "$count" ] || no "$count exercise files, $answers answers in docs/answers.md"
for f in "${stubs[@]}"; do
    name=$(basename "$f")
    grep -qF "(../examples/exercises/$name)" docs/start.md || no "docs/start.md's list of exercises lacks $name"
    "$CC" "${FLAGS[@]}" -c "$f" -o "$tmp/stub_${name%.c}.o" 2> "$tmp/err" || no "$name: the stub does not compile: $(cat "$tmp/err")"
    answer "$name" > "$tmp/answer_$name"
    [ "$(wc -l < "$tmp/answer_$name")" -gt 3 ] || no "$name: no answer in docs/answers.md"
    "$CC" "${FLAGS[@]}" -c "$tmp/answer_$name" -o "$tmp/answer_${name%.c}.o" 2> "$tmp/err" ||
        no "$name: the answer does not compile: $(cat "$tmp/err")"
done
link() { # OUT, then the objects
    local out=$1; shift
    "$CC" "$B/f64/tests/exercises/check.o" "$@" "$B/libattograd64.a" -o "$out" ${AG_LDLIBS:--fopenmp -lm} 2> "$tmp/err" ||
        { no "linking $out: $(cat "$tmp/err")"; return 1; }
}
link "$tmp/stubs" "$tmp"/stub_*.o && link "$tmp/answers" "$tmp"/answer_*.o || { echo "exercises: $pass passed, $fail failed"; exit 1; }
"$tmp/answers" 0 2> "$tmp/err"
grep -q "(1 to $count)" "$tmp/err" || no "the checker knows $(cat "$tmp/err"), the tree has $count exercises"
for n in $(seq 1 "$count"); do
    if "$tmp/stubs" "$n" > "$tmp/out" 2>&1; then no "exercise $n: the stub passes its check"
    elif grep -q "exercise $n: not yet" "$tmp/out"; then ok "exercise $n: the stub fails ($(grep -m1 'wrong' "$tmp/out" | sed 's/^ *//'))"
    else no "exercise $n: the stub's check crashed or said nothing: $(tail -n 3 "$tmp/out")"; fi
    if "$tmp/answers" "$n" > "$tmp/out" 2>&1; then ok "exercise $n: the answer passes"
    else no "exercise $n: the answer fails: $(cat "$tmp/out")"; fi
done

# The typical mistakes: each breaks one answer; the checker must say so.
m=0
while IFS=$'\t' read -r n subst expect; do
    [ -z "$n" ] || [ "${n:0:1}" = "#" ] && continue
    m=$((m + 1))
    name=$(basename examples/exercises/"$(printf %02d "$n")"_*.c)
    perl -pe "$subst" "$tmp/answer_$name" > "$tmp/wrong.c"
    if cmp -s "$tmp/answer_$name" "$tmp/wrong.c"; then no "mistake $m ($name): '$subst' no longer changes the answer"; continue; fi
    others=("$tmp"/answer_*.o)
    others=("${others[@]/$tmp\/answer_${name%.c}.o/}")
    # a learner's mistake may warn (an unused variable): no -Werror for it
    if ! "$CC" "${LEARNER_FLAGS[@]}" -c "$tmp/wrong.c" -o "$tmp/wrong.o" 2> "$tmp/err"; then no "mistake $m ($name): does not compile: $(cat "$tmp/err")"; continue; fi
    link "$tmp/wrong" "$tmp/wrong.o" ${others[@]} || continue
    if "$tmp/wrong" "$n" > "$tmp/out" 2>&1; then no "mistake $m ($name, $subst): the checker passes it"; continue; fi
    missing=""
    IFS=$'\t' read -r -a texts <<< "$expect"
    for text in "${texts[@]}"; do grep -qF -- "$text" "$tmp/out" || missing+=" [$text]"; done
    if [ -z "$missing" ]; then ok "mistake $m ($name, $subst): $(grep -m1 'hint' "$tmp/out" | sed 's/^ *//')"
    else no "mistake $m ($name, $subst): the checker does not say$missing; it says:"; sed 's/^/    /' "$tmp/out"; fi
done < tests/exercises/mistakes.txt
[ "$m" -gt 0 ] || no "no mistakes read from tests/exercises/mistakes.txt"
echo "exercises: $pass passed, $fail failed"
[ "$fail" = 0 ]
