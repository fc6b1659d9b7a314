#!/usr/bin/env bash
# check_layers.sh: every source file includes only the headers its layer may
# use.  The layers, lowest first:
#
#   src/core/, ops/   the engine          attograd_core.h, core/*.h, kernels/*.h
#   src/kernels/      the fast kernels    attograd_core.h, core/*.h, kernels/*.h
#   src/nn/           layers and models   + attograd_nn.h, attograd_optim.h, nn/*.h
#   src/io/           files, safetensors  public headers, core/alloc.h, io/*.h
#   src/text/         tokenizer, BLEU     public headers, core/alloc.h, io/*.h, text/*.h
#   src/viz/          SVG and DOT         public headers, core/alloc.h, io/*.h, viz/*.h
#   examples/         programs            public headers, their own headers,
#                                         examples/common/*.h (shared by examples)
#
# io, text and viz use only the public API and the allocator (as Lua's
# lauxlib uses only the official API).  Usage: check_layers.sh [ROOT]
set -u
cd "${1:-.}" || exit 2
bad=0
public='attograd(_core|_nn|_optim|_io|_text|_viz)?\.h'

allowed() { # layer header -> 0 when allowed
    local layer=$1 h=$2
    case $layer in
    core | kernels) [[ $h =~ ^(attograd_core\.h|core/[a-z_]+\.h|kernels/[a-z_0-9]+\.h)$ ]] ;;
    nn) [[ $h =~ ^(attograd_core\.h|attograd_nn\.h|attograd_optim\.h|core/[a-z_]+\.h|nn/[a-z_]+\.h)$ ]] ;;
    io) [[ $h =~ ^($public|core/alloc\.h|io/[a-z_]+\.h)$ ]] ;;
    text) [[ $h =~ ^($public|core/alloc\.h|io/[a-z_]+\.h|text/[a-z_]+\.h)$ ]] ;;
    viz) [[ $h =~ ^($public|core/alloc\.h|io/[a-z_]+\.h|viz/[a-z_]+\.h)$ ]] ;;
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
        allowed "$layer" "$h" || { echo "layers: $f ($layer) may not include \"$h\""; bad=1; }
    done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
done
if [ $bad = 0 ]; then echo "layers: $count files, every include allowed"; else echo "layers: FAILED"; fi
exit $bad
