# tests/browser.sh: what the tests in a real browser share (tests/explorer/,
# tests/live/).  A script sets NAME and sources it after tests/lib.sh ($tmp,
# ok, no):
#
#   need COMMAND PACKAGE     COMMAND, installed with apt-get when missing
#                            (as root); status 1 when it is still missing
#   browse URL LOG [flags]   Debian's chromium, headless, on URL: chromium's
#                            log in LOG (a console message is a CONSOLE
#                            line), with a proxy to nowhere (a fetch fails)
#   offline PAGE             ok when PAGE names no http(s) URL
#   shot PAGE QUERY PNG [flags]  a screenshot of PAGE?QUERY
#   clicker                  puppeteer-core (npm's, which drives this
#                            chromium where a page must be clicked) in
#                            $B/node, installed with npm when missing, by
#                            one suite at a time (flock); status 1 when it
#                            is still missing
#
# Sourcing it installs chromium and /usr/bin/python3 ($PY) when missing, or
# skips the test (exit 0, 'NAME: 0 passed, 0 failed (skipped)').
need() {
    command -v "$1" > /dev/null && return 0
    if [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null; then
        echo "$NAME: $1 missing: installing $2 with apt-get"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" > /dev/null
    fi
    command -v "$1" > /dev/null
}
clicker() { # one suite at a time (make -j runs them side by side): the others wait, then find it
    mkdir -p "$B/node" || return 1
    (
        flock 9
        # npm can hang on a registry connection that stops answering (seen:
        # twenty minutes, no CPU, the files already written): each try is cut
        # off after 5 minutes, and a second one follows a failed first
        for try in 1 2; do
            [ -f "$B/node/node_modules/puppeteer-core/package.json" ] && break
            need npm npm || break
            echo "$NAME: installing puppeteer-core with npm into $B/node (try $try)"
            (cd "$B/node" && timeout 300 npm install --no-audit --no-fund --silent --fetch-timeout=60000 \
                puppeteer-core@22 > /dev/null 2>&1) || echo "$NAME: npm install failed or timed out"
        done
    ) 9> "$B/node/.install-lock"
    [ -f "$B/node/node_modules/puppeteer-core/package.json" ]
}
PY=/usr/bin/python3
if ! need chromium chromium || { [ ! -x $PY ] && ! need python3 python3; }; then
    echo "skip $NAME: chromium or $PY is missing and cannot be installed (run as root with apt-get, or:" \
        "sudo apt-get install chromium python3)"
    echo "$NAME: 0 passed, 0 failed (skipped)"
    exit 0
fi

browse() {
    local url=$1 log=$2 profile
    shift 2
    profile=$(mktemp -d "$tmp/profile.XXXX")
    timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync --disable-extensions \
        --proxy-server=127.0.0.1:9 --user-data-dir="$profile" --enable-logging=stderr --v=0 \
        --window-size=1200,1400 "$@" "$url" 2> "$log"
}
offline() {
    if grep -qiE 'https?://' "$1"; then no "$1 names a URL: $(grep -oiE 'https?://[^"<> ]*' "$1" | head -3)"
    else ok; fi
}
shot() {
    browse "file://$(realpath "$1")?$2" "$tmp/shot.log" --screenshot="$3" "${@:4}" > /dev/null
    if [ -s "$3" ]; then ok; else no "no screenshot of $1"; fi
}
