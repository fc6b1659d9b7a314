#!/usr/bin/env bash
# tests/deps.sh: every program and package outside Debian's base system and a
# C compiler that a test suite runs, in one table, and what installs them.
#
#   tests/deps.sh install [GROUP...]   install what is missing (default group:
#                                      test, what make test runs) with one
#                                      apt-get call, as root; prints what it
#                                      installed, or that nothing was missing
#   tests/deps.sh missing [GROUP...]   print the missing probes; status 1 if any
#   tests/deps.sh list                 the table: probe, packages, group, users
#
# A probe is a command (found on PATH), an absolute path (a glob: it must
# match a file), or h:HEADER (the C compiler $CC finds it).  Groups: test
# (make test), ci (the steps .ci/run adds: MPI, arm64 under qemu).  The
# suites still install what they need when run alone (make live-test on a
# fresh machine), but make test installs everything first, in one call, so
# that no two suites run apt-get at once.  tests/deps_check.sh (CI) fails
# when a suite runs a program that this table does not name.
set -u
CC=${CC:-cc}

table() {
    cat << 'EOF'
h:criterion/criterion.h        libcriterion-dev        test  the Criterion suites (criterion-f32, criterion-f64)
/usr/bin/python3               python3                 test  explorer-test, live-test, ladder-test, translate-test, saturation-test, bf16-quality-test
chromium                       chromium                test  explorer-test, live-test, pictures-test
node                           nodejs                  test  pictures-test (tests/pictures/wasi_run.js), live-test
npm                            npm                     test  live-test (puppeteer-core, from the npm registry, drives chromium)
compare                        imagemagick             test  pictures-test (the live pictures' pixels)
identify                       imagemagick             test  pictures-test (a picture is not blank)
rsvg-convert                   librsvg2-bin            test  pictures-test (the SVG pictures render)
dot                            graphviz                test  criterion-f32/f64 (test_viz), examples-test, pictures-test
valgrind                       valgrind                test  translate-test (the training run under valgrind)
pkg-config                     pkg-config              test  install-test
perl                           perl                    test  docs-test, pictures-test (File::Temp, Compress::Zlib)
clang                          clang                   test  live-test, pictures-test (make wasm)
wasm-ld                        lld                     test  live-test, pictures-test (make wasm)
llvm-ar                        llvm                    test  live-test, pictures-test (make wasm)
/usr/include/wasm32-wasi/stdio.h wasi-libc             test  live-test, pictures-test (make wasm)
/usr/lib/llvm-14/lib/clang/*/lib/wasi/libclang_rt.builtins-wasm32.a libclang-rt-14-dev-wasm32 test live-test, pictures-test
mpirun                         openmpi-bin             ci    make mpi-test
mpicc                          libopenmpi-dev          ci    make mpi-test
aarch64-linux-gnu-gcc          gcc-aarch64-linux-gnu   ci    make arm64-test
qemu-aarch64                   qemu-user               ci    make arm64-test
pkill                          procps                  ci    make mpi-test (SIGTERM to every process)
EOF
}

# present PROBE: status 0 when the probe finds what it names
present() {
    case $1 in
    h:*) printf '#include <%s>\n' "${1#h:}" | $CC -E -x c - > /dev/null 2>&1 ;;
    /*) compgen -G "$1" > /dev/null ;;
    *) command -v "$1" > /dev/null ;;
    esac
}

# missing_rows GROUP...: the rows whose probe is missing
missing_rows() {
    local groups=" ${*:-test} "
    table | while read -r probe pkg group users; do
        [[ $groups == *" $group "* ]] || continue
        present "$probe" || echo "$probe $pkg $group $users"
    done
}

install() {
    local rows pkgs
    rows=$(missing_rows "$@")
    if [ -z "$rows" ]; then
        echo "deps: nothing to install (every program the ${*:-test} suites run is here)"
        return 0
    fi
    pkgs=$(awk '{print $2}' <<< "$rows" | sort -u | tr '\n' ' ')
    if [ "$(id -u)" != 0 ] || ! command -v apt-get > /dev/null; then
        echo "deps: missing: $(awk '{print $1}' <<< "$rows" | tr '\n' ' ')"
        echo "deps: run  sudo apt-get install $pkgs (or make test as root on Debian)"
        return 1
    fi
    echo "deps: installing with apt-get: $pkgs"
    # wait for a dpkg lock held by another apt-get rather than fail
    if ! { apt-get -o DPkg::Lock::Timeout=600 update -qq &&
        DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
            $pkgs; } > /tmp/attograd-deps.$$.log 2>&1; then
        tail -n 20 /tmp/attograd-deps.$$.log
        rm -f /tmp/attograd-deps.$$.log
        echo "deps: apt-get install $pkgs failed"
        return 1
    fi
    rm -f /tmp/attograd-deps.$$.log
    rows=$(missing_rows "$@")
    if [ -n "$rows" ]; then
        echo "deps: still missing after apt-get: $(awk '{print $1 " (" $2 ")"}' <<< "$rows" | tr '\n' ' ')"
        return 1
    fi
    echo "deps: installed $pkgs"
}

case ${1:-} in
install) shift; install "$@" ;;
missing) shift; rows=$(missing_rows "$@"); [ -z "$rows" ] || { echo "$rows"; exit 1; } ;;
list) table ;;
*) echo "usage: tests/deps.sh install|missing [GROUP...] | list" >&2; exit 2 ;;
esac
