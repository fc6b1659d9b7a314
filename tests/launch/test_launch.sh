#!/usr/bin/env bash
# tests/launch/test_launch.sh BUILD_DIR: the suites pass however make test
# was started.  The signal tests' mechanism (probe.sh) runs started five
# ways: in the foreground; as a background job of a script (`cmd &`, which
# starts with SIGINT ignored); under nohup in such a job; with stdin
# closed; and under setsid.  Each must pass; the background runs must
# really have started with SIGINT ignored (else this test proves nothing).
# Each run is bounded by a timeout: a hang is a failure, not a stuck suite.
set -u
B=${1:-build}
probe=$(dirname "$0")/probe.sh
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
no() { fail=$((fail + 1)); echo "FAIL $1"; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT

# launch NAME WANT_SIGINT COMMAND...: COMMAND runs probe.sh; its output in $out
launch() {
    local name=$1 want=$2
    shift 2
    timeout 300 "$@" > "$out" 2>&1
    local rc=$?
    if [ $rc != 0 ]; then no "$name: exit $rc: $(tail -n 3 "$out" | tr '\n' ' ')"; return; fi
    if ! grep -qx "sigint: $want" "$out"; then no "$name: the probe started with $(grep sigint: "$out"), want $want"
    else ok "$name: SIGINT and SIGTERM stop training with a checkpoint (the script's SIGINT: $want)"; fi
}
launch "foreground" default bash "$probe" "$B"
launch "background job (cmd &)" ignored bash -c 'bash "$1" "$2" & wait $!' _ "$probe" "$B"
launch "nohup in a background job" ignored bash -c 'nohup bash "$1" "$2" > /dev/stdout 2>&1 & wait $!' _ "$probe" "$B"
launch "stdin closed" default bash -c 'bash "$1" "$2" <&-' _ "$probe" "$B"
launch "setsid" default setsid -w bash "$probe" "$B"
echo "launch: $pass passed, $fail failed"
[ "$fail" = 0 ]
