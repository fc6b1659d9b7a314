#!/usr/bin/env bash
# tests/bench/isa_tables.sh [LEVEL ...]: docs/benchmarks.md's table per
# instruction-set level, from one machine.  For each level (default: every
# one of avx512, avx2, baseline that the CPU has) it runs `make bench-scale
# BENCH_ISA=LEVEL` (attograd, PyTorch and OpenBLAS at that level,
# tests/bench/bench.mk), then writes the level's section of
# docs/benchmarks.md, between its markers <!-- isa: LEVEL begin --> and
# <!-- isa: LEVEL end -->: the date, the machine and library lines the
# bench prints, and its first table (the GPT's step at S, M and XL).
# Minutes per level: run it on a quiet machine (`make bench-isa`).
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
BUILD=${BUILD:-build}
levels=("$@")
if [ ${#levels[@]} -eq 0 ]; then
    levels=(baseline)
    grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo && levels=(avx2 "${levels[@]}")
    grep -qw avx512f /proc/cpuinfo && levels=(avx512 "${levels[@]}")
fi
doc=docs/benchmarks.md
for l in "${levels[@]}"; do
    grep -q "<!-- isa: $l begin -->" "$doc" || { echo "isa_tables: $doc has no markers for $l" >&2; exit 1; }
done

for l in "${levels[@]}"; do
    when=$(date -u '+%Y-%m-%d %H:%M UTC')
    make --no-print-directory BUILD="$BUILD" bench-scale BENCH_ISA="$l" > "$BUILD/bench-isa-$l.log" 2>&1 ||
        { tail -n 20 "$BUILD/bench-isa-$l.log"; exit 1; }
    out="$BUILD/bench-scale-$l.md"
    # the section: date, machine and library lines, the first table
    {
        echo "Made $when by \`make bench-isa\` (\`make bench-scale BENCH_ISA=$l\`):"
        echo
        grep -E '^(CPU:|PyTorch |OpenBLAS )' "$out" | sed 's/$/  /'
        echo
        awk '/^\|/ {t = 1; print; next} t {exit}' "$out"
    } > "$BUILD/isa-$l.md"
    awk -v f="$BUILD/isa-$l.md" -v b="<!-- isa: $l begin -->" -v e="<!-- isa: $l end -->" '
        $0 == e {while ((getline x < f) > 0) print x; skip = 0}
        !skip {print}
        $0 == b {skip = 1}' "$doc" > "$BUILD/benchmarks.md.new"
    mv "$BUILD/benchmarks.md.new" "$doc"
    echo "isa_tables: $l written ($out)"
done
