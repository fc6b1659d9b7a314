#!/usr/bin/env bash
# tests/headers/ratio.sh [ROOT]: the public headers state contracts, not
# essays.  Counts, over include/attograd*.h together, comment lines and code
# lines, and fails when comments / code exceeds 0.7.
#
# The counting rule, per physical line:
#   - blank (only white space): not counted;
#   - comment: every non-blank character is inside a /* */ comment or after
#     a // (a line of a block comment, a comment alone on its line);
#   - code: any other line, including code with a comment after it.
# Prints one line per header and 'headers: C comment / N code = R' last.
set -u
cd "${1:-.}" || exit 2
max=0.7
files=(include/attograd*.h)
[ -f "${files[0]}" ] || { echo "headers: no include/attograd*.h under $(pwd)"; exit 2; }
count() { # file -> "comment code"
    awk '
    {
        line = $0; rest = ""
        while (length(line) > 0) {
            if (inc) {
                e = index(line, "*/")
                if (e == 0) { line = ""; break }
                line = substr(line, e + 2); inc = 0; continue
            }
            s = index(line, "/*"); d = index(line, "//")
            if (d > 0 && (s == 0 || d < s)) { rest = rest substr(line, 1, d - 1); line = ""; break }
            if (s == 0) { rest = rest line; line = ""; break }
            rest = rest substr(line, 1, s - 1); line = substr(line, s + 2); inc = 1
        }
        if ($0 ~ /^[ \t]*$/) next
        if (rest ~ /[^ \t]/) code++; else com++
    }
    END { printf "%d %d\n", com, code }' "$1"
}
tcom=0 tcode=0
for f in "${files[@]}"; do
    read -r c n < <(count "$f")
    printf 'headers: %-24s %4d comment %4d code\n' "$f" "$c" "$n"
    tcom=$((tcom + c)) tcode=$((tcode + n))
done
ratio=$(awk -v c="$tcom" -v n="$tcode" 'BEGIN { printf "%.2f", n ? c / n : 99 }')
echo "headers: $tcom comment / $tcode code = $ratio (at most $max)"
awk -v r="$ratio" -v m="$max" 'BEGIN { exit !(r <= m) }' || { echo "headers: FAILED: the public headers carry more prose than $max per line of code: move rationale to docs/design.md"; exit 1; }
