# tests/lib.sh: what the command-line test scripts share.  A script sets
# BIN (the program under test) and, when not 60 s, TIMEOUT, then sources it:
#
#   tmp                                a fresh folder, removed on exit
#   ok / no WHAT                       count a pass / a failure (no prints WHAT)
#   run NAME STATUS TEXT ARGS...       BIN ARGS (stdin closed); checks the exit
#                                      status and that TEXT (a fixed string, ''
#                                      for none) is in its stderr; stdout and
#                                      stderr stay in $tmp/out and $tmp/err
#   usage NAME ARGS...                 run NAME 2 "usage:" ARGS, and no model
#                                      written to $tmp/never.safetensors
#   stop_when SIG TEXT LOG ARGS...     BIN ARGS in the background, output to
#                                      LOG; once TEXT is in LOG (the loop is
#                                      running, whatever the machine's load),
#                                      SIG; the exit status in $stopped_rc
#   start_bg LOG CMD ARGS...           CMD in the background with SIGINT and
#                                      SIGTERM at their defaults, output to
#                                      LOG; its pid in $bg_pid
#   wait_bounded PID SECONDS           wait for PID at most SECONDS, then
#                                      SIGKILL it; its exit status (137 after
#                                      the kill)
#   finish NAME                        'NAME: N passed, N failed'; status 1
#                                      when any failed
#
# A status above 128 from run is a crash (or the timeout's signal).
if [ ! -x "$BIN" ]; then
    echo "$(basename "$0" .sh): $BIN not found (make $BIN first)"
    echo "0 passed, 1 failed"
    exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "${BASH_SOURCE[0]}")/bg.sh" # start_bg, wait_bounded
pass=0 fail=0
ok() { pass=$((pass + 1)); }
no() { fail=$((fail + 1)); echo "FAIL $1"; }

run() {
    local name=$1 want=$2 text=$3
    shift 3
    timeout "${TIMEOUT:-60}" "$BIN" "$@" < /dev/null > "$tmp/out" 2> "$tmp/err"
    local got=$?
    if [ "$got" != "$want" ]; then
        no "$name: exit $got, want $want ($(head -c 300 "$tmp/err"))"
    elif [ -n "$text" ] && ! grep -qF -- "$text" "$tmp/err"; then
        no "$name: '$text' not in stderr: $(head -c 300 "$tmp/err")"
    else
        ok
    fi
}

usage() {
    local name=$1
    shift
    run "$name" 2 "usage:" "$@"
    if [ -e "$tmp/never.safetensors" ]; then no "$name: a model was written"; rm -f "$tmp/never.safetensors"; fi
}

stop_when() {
    local sig=$1 text=$2 log=$3
    shift 3
    start_bg "$log" "$BIN" "$@"
    for _ in $(seq 2400); do # at most two minutes
        grep -qF -- "$text" "$log" && break
        kill -0 "$bg_pid" 2> /dev/null || break
        sleep 0.05
    done
    kill -"$sig" "$bg_pid" 2> /dev/null
    wait_bounded "$bg_pid" 120
    stopped_rc=$?
}

finish() {
    echo "$1: $pass passed, $fail failed"
    [ "$fail" = 0 ]
}
