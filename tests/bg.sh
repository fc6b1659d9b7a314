# tests/bg.sh: starting a program in the background that a test will
# signal, and waiting for it with a time limit; sourced by tests/lib.sh, and by
# the scripts that do not source lib.sh.
#
#   start_bg LOG CMD ARGS...    CMD in the background, stdin closed, output
#                               to LOG, SIGINT and SIGTERM at their
#                               defaults; its pid in $bg_pid
#   wait_bounded PID SECONDS    wait for PID at most SECONDS, then SIGKILL it;
#                               returns its exit status (137 after the kill)
#
# A background job of a script starts with SIGINT ignored, and so does
# everything under nohup or a shell's `make test &`: a signal a program
# inherits as ignored, it keeps ignored (as it should).  So the programs a
# test signals start with both signals at their defaults, however the test
# itself was started (in the foreground, `&`, nohup, setsid, stdin closed).
start_bg() {
    local log=$1
    shift
    env --default-signal=INT,TERM "$@" > "$log" 2>&1 < /dev/null &
    bg_pid=$!
}

wait_bounded() {
    local pid=$1 limit=$2 t=0
    while kill -0 "$pid" 2> /dev/null && [ $t -lt $((limit * 20)) ]; do
        sleep 0.05
        t=$((t + 1))
    done
    if kill -0 "$pid" 2> /dev/null; then
        echo "$(basename "$0"): pid $pid still running after ${limit} s: killed" >&2
        kill -KILL "$pid" 2> /dev/null
    fi
    wait "$pid"
}

