#!/usr/bin/env bash
# tests/install/test_install.sh BUILD_DIR: make install as a user runs it.
#   - make install DESTDIR=tmp PREFIX=/opt/attograd puts the headers, the
#     static and shared libraries and attograd.pc / attograd64.pc there;
#   - the README's first example (its first ```c block) builds with
#     `pkg-config --cflags --libs attograd` against the shared library and
#     against the static one, runs, and prints the README's ```output block;
#     with attograd64 it builds against the double library and runs;
#   - make uninstall leaves no file and no link behind.
# pkg-config is installed with apt-get when missing (as root), as make test
# does for Criterion.  Prints 'install: N passed, N failed' last; exits 1 on a failure.
set -u
B=$(cd "${1:-build}" && pwd)
MAKE=${MAKE:-make}
CC=${CC:-cc}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
no() { fail=$((fail + 1)); echo "FAIL $1"; }

if ! command -v pkg-config > /dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null; then
        echo "pkg-config missing: installing it with apt-get"
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pkg-config; } > /dev/null || exit 1
    else echo "pkg-config is missing: run  sudo apt-get install pkg-config"; exit 1; fi
fi

dest="$tmp/dest" prefix=/opt/attograd
lib="$dest$prefix/lib"
if $MAKE --no-print-directory -s install BUILD="$B" DESTDIR="$dest" PREFIX="$prefix" > "$tmp/install.log" 2>&1
then ok "make install DESTDIR=... PREFIX=$prefix"
else no "make install failed:"; tail -n 20 "$tmp/install.log"; fi

# The soname rule (CHANGELOG.md): libattograd.so.0.MINOR before 1.0, then
# libattograd.so.MAJOR; the version is the one attograd.pc states.
version=$(sed -n 's/^Version: //p' "$lib/pkgconfig/attograd.pc" 2> /dev/null)
IFS=. read -r major minor _ <<< "$version"
if [ "$major" = 0 ]; then so=$major.$minor; else so=$major; fi
want="include/attograd.h include/attograd_core.h include/attograd_compat.h lib/libattograd.a lib/libattograd64.a
lib/libattograd.so lib/libattograd.so.$so lib/libattograd.so.$version lib/libattograd64.so lib/libattograd64.so.$so
lib/libattograd64.so.$version lib/pkgconfig/attograd.pc lib/pkgconfig/attograd64.pc"
missing=""
for f in $want; do [ -e "$dest$prefix/$f" ] || missing="$missing $f"; done
for h in include/attograd*.h; do cmp -s "$h" "$dest$prefix/$h" || missing="$missing $h"; done
if [ -z "$missing" ]; then ok "installed: every header, both libraries static and shared, both .pc files"
else no "not installed:$missing"; fi
if grep -qx "prefix=$prefix" "$lib/pkgconfig/attograd.pc" 2> /dev/null; then ok "attograd.pc names prefix=$prefix"
else no "attograd.pc does not name prefix=$prefix"; fi
for l in attograd attograd64; do
    got=$(readelf -d "$lib/lib$l.so.$version" 2> /dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
    if [ "$got" = "lib$l.so.$so" ]; then ok "lib$l.so.$version: soname $got (version $version)"
    else no "lib$l.so.$version: soname '$got', the rule for version '$version' gives lib$l.so.$so"; fi
done

# The README's first example and its output.
mkdir -p "$tmp/ex"
awk -v out="$tmp/ex" -f tests/docs/extract.awk README.md
if [ -f "$tmp/ex/001.c" ] && [ -f "$tmp/ex/001.out" ] && grep -q 'main *(' "$tmp/ex/001.c"; then
    ok "README's first example is a program with an output block"
else no "README's first ```c block is not a program followed by an ```output block"; fi

export PKG_CONFIG_PATH="$lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$dest"
# name, pkg-config package, link: shared or static
build_run() {
    local name=$1 pc=$2 how=$3 flags
    if [ "$how" = shared ]; then flags=$(pkg-config --cflags --libs "$pc")
    else flags=$(pkg-config --static --cflags --libs "$pc" | sed "s/-l$pc\\b/-l:lib$pc.a/"); fi
    if ! "$CC" -std=c11 -Wall -Wextra -Werror "$tmp/ex/001.c" -o "$tmp/$name" $flags 2> "$tmp/$name.err"; then
        no "$name: cc example.c $flags failed:"; head -n 10 "$tmp/$name.err"; return 1
    fi
    local needs
    needs=$(readelf -d "$tmp/$name" | grep '(NEEDED)' | grep -cF "[lib$pc.so.$so]")
    if [ "$how" = shared ] && [ "$needs" != 1 ]; then no "$name: the program does not load lib$pc.so.$so"; return 1; fi
    if [ "$how" = static ] && [ "$needs" != 0 ]; then no "$name: the program loads lib$pc.so.$so"; return 1; fi
    if ! LD_LIBRARY_PATH="$lib" "$tmp/$name" > "$tmp/$name.got" 2>&1; then
        no "$name: the program failed: $(head -n 3 "$tmp/$name.got")"; return 1
    fi
    return 0
}
for how in shared static; do
    if build_run "ex_$how" attograd $how; then
        if cmp -s "$tmp/ex/001.out" "$tmp/ex_$how.got"; then ok "pkg-config attograd, $how: README's example prints $(head -n 1 "$tmp/ex_$how.got")"
        else no "pkg-config attograd, $how: printed $(head -n 1 "$tmp/ex_$how.got"), the README says $(head -n 1 "$tmp/ex/001.out")"; fi
    fi
done
# In double the last digits may differ from the README's float output: the
# program must run and print the same words.
if build_run ex64 attograd64 shared; then
    shape() { sed 's/[-0-9.e+]*[0-9]/N/g' "$1"; }
    if [ "$(shape "$tmp/ex64.got")" = "$(shape "$tmp/ex/001.out")" ]; then ok "pkg-config attograd64, shared: runs in double: $(head -n 1 "$tmp/ex64.got")"
    else no "pkg-config attograd64: printed $(head -n 1 "$tmp/ex64.got")"; fi
fi

if $MAKE --no-print-directory -s uninstall BUILD="$B" DESTDIR="$dest" PREFIX="$prefix" > "$tmp/uninstall.log" 2>&1
then ok "make uninstall"
else no "make uninstall failed:"; tail -n 20 "$tmp/uninstall.log"; fi
left=$(find "$dest" ! -type d)
if [ -z "$left" ]; then ok "nothing left after make uninstall (only the empty directories install made)"
else no "left after make uninstall: $(echo $left)"; fi

echo "install: $pass passed, $fail failed"
[ "$fail" = 0 ]
