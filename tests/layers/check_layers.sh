#!/usr/bin/env bash
# check_layers.sh: every source file includes only the headers its layer may
# use.  The layers, lowest first:
#
#   src/core/, ops/   the engine          attograd_core.h, core/*.h, kernels/*.h
#   src/kernels/      the fast kernels    attograd_core.h, core/*.h, kernels/*.h
#   src/nn/           layers and models   + attograd_nn.h, attograd_optim.h,
#                                         attograd_compat.h, nn/*.h
#   src/io/           files, safetensors  attograd_core.h, attograd_io.h,
#                                         core/alloc.h, io/*.h
#   src/text/         tokenizer, BLEU     attograd_core.h, attograd_text.h,
#                                         core/alloc.h, io/*.h, text/*.h
#   src/viz/          SVG and DOT         attograd_core.h, attograd_viz.h,
#                                         core/alloc.h, io/*.h, viz/*.h
#   examples/         programs            public headers, their own headers,
#                                         examples/common/*.h (shared by examples)
#
# MPI is no layer's: examples/common/dist_mpi.c alone includes <mpi.h>
# (built only by make MPI=1), so the library never depends on it.
#
# io, text and viz use only the public API of the topic headers they need
# and the allocator (as Lua's lauxlib uses only the official API); the
# umbrella attograd.h would hide which, so it is refused there.
# Usage: check_layers.sh [ROOT]
set -u
cd "${1:-.}" || exit 2
bad=0
public='attograd(_core|_nn|_optim|_io|_text|_viz|_compat)?\.h'

allowed() { # layer header -> 0 when allowed
    local layer=$1 h=$2
    case $layer in
    core | kernels) [[ $h =~ ^(attograd_core\.h|core/[a-z_]+\.h|kernels/[a-z_0-9]+\.h)$ ]] ;;
    nn) [[ $h =~ ^(attograd_(core|nn|optim|compat)\.h|core/[a-z_]+\.h|nn/[a-z_]+\.h)$ ]] ;;
    io) [[ $h =~ ^(attograd_(core|io)\.h|core/alloc\.h|io/[a-z_]+\.h)$ ]] ;;
    text) [[ $h =~ ^(attograd_(core|text)\.h|core/alloc\.h|io/[a-z_]+\.h|text/[a-z_]+\.h)$ ]] ;;
    viz) [[ $h =~ ^(attograd_(core|viz)\.h|core/alloc\.h|io/[a-z_]+\.h|viz/[a-z_]+\.h)$ ]] ;;
    examples) [[ $h =~ ^($public|[a-z_0-9]+\.h|(\.\./)?common/[a-z_0-9]+\.h)$ ]] ;;
    esac
}

layer_of() {
    case $1 in
    src/core/* | ops/*) echo core ;;
    src/kernels/*) echo kernels ;;
    src/nn/*) echo nn ;;
    src/io/*) echo io ;;
    src/text/*) echo text ;;
    src/viz/*) echo viz ;;
    examples/*) echo examples ;;
    *) echo none ;;
    esac
}

files=$(find src ops examples -name '*.[ch]' | sort)
[ -n "$files" ] || { echo "layers: no source files under $(pwd)"; exit 2; }
count=0
for f in $files; do
    layer=$(layer_of "$f")
    [ "$layer" = none ] && { echo "layers: $f is in no layer (src/ has core, kernels, nn, io, text, viz)"; bad=1; continue; }
    count=$((count + 1))
    while IFS= read -r h; do
        if [ "$h" = attograd.h ] && [[ $layer =~ ^(io|text|viz)$ ]]; then
            echo "layers: $f ($layer) includes the umbrella attograd.h: include the topic headers it uses"; bad=1
        elif ! allowed "$layer" "$h"; then echo "layers: $f ($layer) may not include \"$h\""; bad=1; fi
    done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
done
for f in $(grep -l '^[[:space:]]*#[[:space:]]*include[[:space:]]*<mpi\.h>' $files); do
    [ "$f" = examples/common/dist_mpi.c ] || { echo "layers: $f includes <mpi.h> (only examples/common/dist_mpi.c may)"; bad=1; }
done
if [ $bad = 0 ]; then echo "layers: $count files, every include allowed"; else echo "layers: FAILED"; fi
exit $bad
