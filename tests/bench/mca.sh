#!/usr/bin/env bash
# tests/bench/mca.sh [MEASURED.md]: how close gemm's micro-kernels come to
# the FMA units' limit, by llvm-mca's model of each CPU (no run needed: the
# arm64 kernels are judged where no arm64 machine is at hand).
#
# For each kernel (NEON 6 x 4 vectors, AVX2 6 x 2, AVX-512 6 x 4), each
# compiler and each CPU model:
#   1. src/kernels/gemm.c is compiled to assembly (float build, the
#      library's flags), for aarch64 or x86-64;
#   2. the kernel's inner loop is cut out: of the loops in the function
#      (a label, and a branch back to it further down), the one with the
#      most FMAs;
#   3. llvm-mca runs it 1000 times on the CPU model: cycles per iteration;
#   4. the same loop's FMAs alone (no loads, no address arithmetic) give
#      the FMA units' limit on that model, cycles per iteration;
#   5. share = limit / cycles: the fraction of the FMA units' issue rate
#      the loop reaches (100%: every cycle issues as many FMAs as the
#      units take).
# Prints a markdown table; `make mca` writes it between the markers of
# docs/kernels.md.  MEASURED.md (optional): the table of `build/bench
# --only peak` (tests/bench/peak.h) from an x86 machine, whose measured
# share of peak is set beside the x86 rows of its level.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
measured=${1:-}
[ -z "$measured" ] || [ -r "$measured" ] || { echo "mca: $measured: no such file" >&2; exit 1; }
MCA=${MCA:-llvm-mca}
CLANG=${CLANG:-clang}
ARM_GCC=${ARM_GCC:-aarch64-linux-gnu-gcc}
X86_GCC=${X86_GCC:-gcc}
FLAGS=(-std=c11 -O2 -Iinclude -Isrc -D_POSIX_C_SOURCE=200809L -ffp-contract=off -fno-math-errno)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

command -v "$MCA" >/dev/null || { echo "mca: $MCA not found (sudo apt-get install llvm)" >&2; exit 1; }

# asm FILE ARCH COMPILER: gemm.c's assembly for ARCH by COMPILER (clang or
# gcc); false when that compiler is missing
asm() {
    local out=$1 arch=$2 cc=$3
    case $arch-$cc in
    aarch64-clang) "$CLANG" --target=aarch64-linux-gnu "${FLAGS[@]}" -S src/kernels/gemm.c -o "$out" ;;
    aarch64-gcc) command -v "$ARM_GCC" >/dev/null && "$ARM_GCC" "${FLAGS[@]}" -fopenmp-simd -S src/kernels/gemm.c -o "$out" ;;
    x86_64-clang) "$CLANG" --target=x86_64-linux-gnu "${FLAGS[@]}" -S src/kernels/gemm.c -o "$out" ;;
    x86_64-gcc) "$X86_GCC" "${FLAGS[@]}" -fopenmp-simd -S src/kernels/gemm.c -o "$out" ;;
    esac
}

# loop ASM FUNC FMA_RE: the inner loop of FUNC with the most instructions
# matching FMA_RE, one instruction a line (labels and directives dropped)
loop() {
    awk -v fn="$2" -v re="$3" '
        $0 ~ "^" fn ":" { infn = 1; next }
        infn && /^[A-Za-z_][A-Za-z_0-9]*:/ { infn = 0 }       # the next function
        !infn { next }
        /^\.?L[A-Za-z_0-9]*:/ { lab = $1; sub(/:$/, "", lab); start[lab] = n; next }
        /^[ \t]*[.#\/]/ || /^[ \t]*$/ { next }                 # directives, comments
        { sub(/[ \t]*\/\/.*$|[ \t]+#[ \t].*$/, ""); line[n++] = $0   # comments (an arm64 #immediate stays)
          for (l in start) if ($NF == l && start[l] < n - 1) {  # a branch back to label l
              f = 0; for (i = start[l]; i < n; i++) if (line[i] ~ re) f++
              if (f > best) { best = f; from = start[l]; to = n }
          } }
        END { for (i = from; i < to; i++) print line[i] }' "$1"
}

# cycles MCPU TRIPLE FILE: llvm-mca's cycles per iteration of FILE's loop
cycles() {
    "$MCA" -mtriple="$2" -mcpu="$1" -iterations=1000 "$3" 2>/dev/null |
        awk '/^Iterations:/ {it = $2} /^Total Cycles:/ {c = $3} END {if (it) printf "%.2f", c / it}'
}

# kernel LABEL FUNC ARCH TRIPLE FMA_RE MEASURED_KEY CPUS...: the rows of one kernel
kernel() {
    local label=$1 fn=$2 arch=$3 triple=$4 re=$5 key=$6
    shift 6
    for cc in clang gcc; do
        local s="$tmp/$arch-$cc.s"
        if [ ! -f "$s" ] && ! asm "$s" "$arch" "$cc" 2> "$tmp/err"; then
            [ "$cc" = gcc ] && ! command -v "$([ "$arch" = aarch64 ] && echo "$ARM_GCC" || echo "$X86_GCC")" >/dev/null &&
                continue # that compiler is not installed: its rows are left out
            cat "$tmp/err" >&2; exit 1
        fi
        loop "$s" "$fn" "$re" > "$tmp/loop.s"
        grep -E "$re" "$tmp/loop.s" > "$tmp/fma.s" || true
        local n
        n=$(wc -l < "$tmp/fma.s")
        [ "$n" -gt 0 ] || { echo "mca: no FMA loop found in $fn ($cc)" >&2; exit 1; }
        local ver
        ver=$("$cc" --version 2>/dev/null | head -n 1 | grep -oE '[0-9]+\.[0-9]+(\.[0-9]+)?' | head -n 1)
        [ "$arch-$cc" = aarch64-gcc ] && ver=$("$ARM_GCC" -dumpfullversion)
        for cpu in "$@"; do
            local c f m=""
            c=$(cycles "$cpu" "$triple" "$tmp/loop.s")
            f=$(cycles "$cpu" "$triple" "$tmp/fma.s")
            [ -n "$measured" ] && [ -n "$key" ] && [ "$cc" = gcc ] && # the build the bench measures
                m=$(awk -F'|' -v k="$key" '$2 ~ "^ *" k " *$" {v = $(NF - 1); gsub(/ /, "", v); print v; exit}' "$measured")
            printf '| %s | %s %s | %s | %d | %d | %s | %s | %.0f%% | %s |\n' "$label" "$cc" "$ver" "$cpu" "$n" \
                "$(grep -cvE "$re" "$tmp/loop.s")" "$c" "$f" "$(echo "$f $c" | awk '{print 100 * $1 / $2}')" "${m:--}"
        done
    done
}

echo "llvm-mca $("$MCA" --version | grep -oE '[0-9]+\.[0-9]+\.[0-9]+' | head -n 1), the float build's kernels, \`make mca\` ($(date -u +%Y-%m-%d))$([ -n "$measured" ] && echo "; measured share: $(basename "$measured")")."
echo
echo "| kernel | compiler | -mcpu | FMAs | other instructions | cycles / iteration | FMA units' limit | share of the limit | measured share of peak |"
echo "|---|---|---|---:|---:|---:|---:|---:|---:|"
kernel "NEON 6 x 16 (kneon_4)" kneon_4 aarch64 aarch64-linux-gnu 'fmla' "" apple-m1 neoverse-n1
kernel "AVX2 6 x 16 (k256_2)" k256_2 x86_64 x86_64-linux-gnu 'vfmadd' avx2 znver3 haswell
kernel "AVX-512 6 x 64 (k512_4)" k512_4 x86_64 x86_64-linux-gnu 'vfmadd' avx512 skylake-avx512 icelake-server
