#!/usr/bin/env bash
# tests/headers/test_compat.sh [CC]: the deprecated names live in
# include/attograd_compat.h alone, and AG_NO_DEPRECATED hides them.
#   - every public header compiles on its own (it includes what it needs);
#   - each name the compat header defines (typedef, macro or function) is
#     usable through attograd.h, and is undeclared when attograd.h is
#     compiled with -DAG_NO_DEPRECATED;
#   - no other public header names a deprecated name.
# Prints 'compat: N passed, N failed' last; exits 1 on a failure.
set -u
CC=${1:-cc}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 2
BIN=$(command -v "$CC") # the program under test, for tests/lib.sh
. tests/lib.sh
cflags=(-std=c11 -Wall -Wextra -Werror -Iinclude -fsyntax-only)

for h in include/attograd*.h; do
    printf '#include "%s"\n' "$(basename "$h")" > "$tmp/alone.c"
    if "$CC" "${cflags[@]}" "$tmp/alone.c" 2> "$tmp/err"; then ok
    else no "$h does not compile alone: $(head -n 3 "$tmp/err")"; fi
done

# name kind: t (typedef), f (a function, or a macro naming one)
names=$(sed -n -e 's/^typedef [a-z_]* \(ag_[a-z_]*\);$/\1 t/p' -e 's/^#define \(ag_[a-z_]*\) ag_[a-z_]*$/\1 f/p' \
    -e 's/^[a-z][a-z_ ]*[ *]\(ag_[a-z_]*\)(.*$/\1 f/p' include/attograd_compat.h)
count=$(echo "$names" | grep -c .)
[ "$count" -ge 20 ] || no "attograd_compat.h: found only $count names"
while read -r name kind; do
    if [ "$kind" = t ]; then use="$name *p = 0; (void)p;"; else use="(void)&$name;"; fi
    printf '#include "attograd.h"\nint main(void) { %s return 0; }\n' "$use" > "$tmp/$name.c"
    if ! "$CC" "${cflags[@]}" -Wno-deprecated-declarations "$tmp/$name.c" 2> "$tmp/err"; then
        no "$name: not usable through attograd.h: $(head -n 2 "$tmp/err")"
    elif "$CC" "${cflags[@]}" -DAG_NO_DEPRECATED "$tmp/$name.c" 2> "$tmp/err"; then
        no "$name: still declared with -DAG_NO_DEPRECATED"
    elif ! grep -q "$name" "$tmp/err"; then
        no "$name: -DAG_NO_DEPRECATED fails for another reason: $(head -n 2 "$tmp/err")"
    else ok; fi
    for h in include/attograd*.h; do
        [ "$h" = include/attograd_compat.h ] && continue
        if grep -qw "$name" "$h"; then no "$name: named in $h too"; fi
    done
done <<< "$names"
echo "compat: $count deprecated names usable through attograd.h, hidden by -DAG_NO_DEPRECATED"
finish compat
