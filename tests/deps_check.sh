#!/usr/bin/env bash
# tests/deps_check.sh: the programs the test suites run are all either in
# Debian's base system (priority required, or essential), in the tools a C
# build needs (make, gcc, binutils) and git (the clone), or in the table of
# tests/deps.sh that make test installs from.  Run by CI after make test, on
# a machine that may have more installed by hand: a suite that calls a
# program which is here only because someone installed it fails this check,
# instead of failing on a user's fresh machine.
#
#   1. every program tests/deps_commands.pl finds in the suites' scripts and
#      make files that is on this machine comes from such a package;
#   2. every probe of the table's test group is present (make test ran first).
set -u
cd "$(dirname "$0")/.." || exit 2
pass=0 fail=0
ok() { pass=$((pass + 1)); }
no() { fail=$((fail + 1)); echo "FAIL $1"; }

# words the scanner reads as a program that are not one (awk's print)
not_programs=" print "
build_tools=" make gcc-12 gcc clang-14 binutils-x86-64-linux-gnu binutils-aarch64-linux-gnu cpp-12 git "
table_cmds=" $(bash tests/deps.sh list | awk '$1 !~ /^(h:|\/)/ {print $1}' | tr '\n' ' ') "
table_pkgs=" $(bash tests/deps.sh list | awk '{print $2}' | sort -u | tr '\n' ' ') "

# the Debian package that holds FILE ('' when none: a program from outside)
package_of() {
    local r p pkg
    r=$(readlink -f "$1")
    for p in "$r" "${r#/usr}" "/usr$r"; do # /bin is /usr/bin (merged /usr)
        pkg=$(dpkg -S "$p" 2> /dev/null | head -n 1 | cut -d: -f1)
        [ -n "$pkg" ] && echo "$pkg" && return
    done
}

files=$(git ls-files 'tests/*.sh' 'tests/*/*.sh' 'tests/*.mk' 'tests/*/*.mk' 'examples/*/*.mk' Makefile \
    'tests/*.py' 'tests/*/*.py' 'tests/*/*.js' 'tests/*.c' | grep -v '^tests/reference/' |
    grep -v '^tests/fresh_machine.sh$')  # fresh_machine.sh makes the fresh machine: no suite runs it
checked=0
while read -r name where; do
    [[ $not_programs == *" $name "* ]] && continue
    path=$(command -v "$name") || continue # not on this machine: not a program here
    [ "${path#/}" != "$path" ] || continue  # a shell built-in or keyword
    checked=$((checked + 1))
    if [[ $table_cmds == *" $name "* ]]; then ok; continue; fi
    pkg=$(package_of "$path")
    if [ -z "$pkg" ]; then
        no "$name ($where) is $path, from no Debian package: a fresh machine has none (tests/deps.sh)"
        continue
    fi
    info=$(dpkg-query -W -f='${Priority} ${Essential}\n' "$pkg" 2> /dev/null | head -n 1)
    if [[ $info == required* || $info == *" yes" || $build_tools == *" $pkg "* || $table_pkgs == *" $pkg "* ]]; then ok
    else no "$name ($where) comes from $pkg ($info), which make test does not install: add it to tests/deps.sh"; fi
done < <(perl tests/deps_commands.pl $files)
echo "deps: $checked programs the suites run, checked against the base system and tests/deps.sh"

if missing=$(bash tests/deps.sh missing test); then ok
else no "after make test, still missing: $(echo "$missing" | awk '{print $1 " (" $2 ")"}' | tr '\n' ' ')"; fi
echo "deps: $pass passed, $fail failed"
[ "$fail" = 0 ]
