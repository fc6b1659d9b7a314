#!/usr/bin/env bash
# tests/live/time_live.sh BUILD_DIR: the live pages' sizes and speeds, on the
# pages that tests/live/test_live.sh left in BUILD_DIR/live/ (`make
# live-times` runs both).  For each page, in headless chromium in real time
# (no virtual time: the page measures with performance.now()):
#   - its size in bytes;
#   - the time to its first computed picture: from the start of the page's
#     loading until the program, run in the page on a typed input (the
#     tour: on its start), has printed and the explorer has drawn it
#     (data-live_done), with the module's compile and the run apart;
#   - the tour: the time of one training step in the page, (the run of 1000
#     steps - the run of 2 steps) / 998, against the native program's,
#     measured the same way (the best of 3 runs each);
#   - the ladder: its training step in the page's worker against the
#     native program's (the run of 102 steps - the run of 2) / 100, and
#     the longest task of the page's thread while it trains 500 steps.
# A measurement: run it on a quiet machine.  Each page gets 20 s to finish
# (the ladder's, which trains in a worker, in puppeteer-core: tests/live/drive.js).
set -u
B=${1:-build}
BIN=$B/backward_tour
here=$(dirname "$0")
. "$here/../lib.sh" # tmp, ok, no, finish
NAME=live-times
. "$here/../browser.sh" # browse
out=$B/live
WAIT=20000
# PAGE QUERY KEY...: the page's data-live_KEY values after WAIT ms, in ms, one a line
page_times() {
    local page=$1 q=$2 k
    shift 2
    if [ "$(basename "$page")" = ladder.html ]; then # it trains in a worker, which --dump-dom does not wait for
        NODE_PATH="$B/node/node_modules" timeout $((WAIT / 1000)) node "$here/drive.js" dom "$(realpath "$page")" "$q" \
            "$tmp/dom" > /dev/null 2>&1 || return 1
    else browse "file://$(realpath "$page")?$q" "$tmp/log" --timeout=$WAIT --dump-dom > "$tmp/dom"; fi
    grep -q 'data-live="1"' "$tmp/dom" || return 1
    for k in "$@"; do grep -o "data-live_$k=\"[0-9.]*\"" "$tmp/dom" | head -n 1 | cut -d'"' -f2; done
}
first() { # NAME QUERY
    local t
    [ -f "$out/$1.html" ] || { no "$out/$1.html is missing: run  make live-test"; return; }
    if t=($(page_times "$out/$1.html" "$2" done compile last_run)) && [ ${#t[@]} = 3 ]; then
        ok
        printf '%-20s %9d bytes, first computed picture %8.1f ms (compile %.1f ms, run %.1f ms)\n' "$1.html" \
            "$(wc -c < "$out/$1.html")" "${t[0]}" "${t[1]}" "${t[2]}"
    else no "$1.html?$2: the page did not finish its run in $WAIT ms ($(grep -o '<body[^>]*>' "$tmp/dom"))"; fi
}
first translate "live_input=i%20lost%20."
first gpt "live_input=We%20"
first backward_tour ""
first ladder "live_input=We%20go."

# the tour's training step, in the page and native: the run of 1000 steps
# against the run of 2 (in the page, each the third run of a fresh page, the
# module warmed by two runs before: live_steps=2 clicks of 1 or of 500)
best() { sort -g | head -n 1; }
page_run() { for i in 1 2 3; do page_times "$out/backward_tour.html" "live_steps=2&live_count=$1" last_run; done | best; }
native_run() { # in ms
    for i in 1 2 3; do
        local t0=$(date +%s%N)
        "$B/backward_tour" --steps "$1" --json "$tmp/tour.json" > /dev/null || return 1
        echo "$((($(date +%s%N) - t0) / 1000))" | awk '{ print $1 / 1000 }'
    done | best
}
p2=$(page_run 1) p1000=$(page_run 500) n2=$(native_run 2) n1000=$(native_run 1000)
if [ -n "$p2" ] && [ -n "$p1000" ] && [ -n "$n2" ] && [ -n "$n1000" ]; then
    ok
    awk -v p2="$p2" -v p1="$p1000" -v n2="$n2" -v n1="$n1000" 'BEGIN {
        page = (p1 - p2) / 998 * 1000; native = (n1 - n2) / 998 * 1000   # microseconds a step
        printf "the tour'"'"'s training step: %.2f us in the page, %.2f us native (%.1fx)\n", page, native,
            (native > 0 ? page / native : 0) }'
else no "the tour's step times: page $p2 / $p1000 ms, native $n2 / $n1000 ms"; fi
# the ladder's training step (rung 8 on its default data), in the page's
# worker and native (the program as a user runs it, and on one thread): the
# run of 102 steps against the run of 2, best of 3 each
ladder_page() { for i in 1 2 3; do page_times "$out/ladder.html" "live_input=We%20go.&live_train=$1" last_run; done | best; }
ladder_native() { # THREADS STEPS, in ms
    for i in 1 2 3; do
        local t0=$(date +%s%N)
        env ${1:+OMP_NUM_THREADS=$1} "$B/ladder" 8 --steps "$2" --input "We go." --json "$tmp/ladder.json" > /dev/null || return 1
        echo "$((($(date +%s%N) - t0) / 1000))" | awk '{ print $1 / 1000 }'
    done | best
}
lp2=$(ladder_page 2) lp102=$(ladder_page 102)
ln2=$(ladder_native "" 2) ln102=$(ladder_native "" 102) l1n2=$(ladder_native 1 2) l1n102=$(ladder_native 1 102)
if [ -n "$lp2" ] && [ -n "$lp102" ] && [ -n "$ln2" ] && [ -n "$ln102" ] && [ -n "$l1n2" ] && [ -n "$l1n102" ]; then
    ok
    awk -v p2="$lp2" -v p1="$lp102" -v n2="$ln2" -v n1="$ln102" -v o2="$l1n2" -v o1="$l1n102" 'BEGIN {
        page = (p1 - p2) / 100; native = (n1 - n2) / 100; one = (o1 - o2) / 100   # ms a step
        printf "the ladder'"'"'s training step: %.2f ms in the page, %.2f ms native (%.1fx), %.2f ms native on one thread (%.1fx)\n",
            page, native, (native > 0 ? page / native : 0), one, (one > 0 ? page / one : 0) }'
else no "the ladder's step times: page $lp2 / $lp102 ms, native $ln2 / $ln102, one thread $l1n2 / $l1n102 ms"; fi
# the ladder's page while it trains 500 steps in its worker: the longest task
# of the page's thread (the performance timeline's long tasks, over 50 ms)
if NODE_PATH="$B/node/node_modules" node "$here/drive.js" train "$(realpath "$out/ladder.html")" 500 \
    > "$tmp/train.json" 2> /dev/null; then
    ok
    $PY - "$tmp/train.json" <<'PYEOF'
import json, sys
r = json.load(open(sys.argv[1]))
during = [t["ms"] for t in r["long"] if t["at"] < r["trained"]]
print("the ladder's page, 500 steps in its worker: %.1f s; the page's longest task meanwhile: %s"
      % (r["ms"] / 1000, "%.0f ms" % max(during) if during else "none over 50 ms"))
PYEOF
else no "the ladder's page did not train 500 steps (tests/live/drive.js train)"; fi
finish live-times
