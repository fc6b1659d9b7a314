#!/usr/bin/env bash
# tests/launch/probe.sh BUILD_DIR: the signal tests' mechanism, small: gpt
# train on a tiny model, stopped by SIGINT and by SIGTERM once its loop
# runs (tests/lib.sh's stop_when), must exit 130 / 143 with a checkpoint.
# Its first line says whether this script itself started with SIGINT
# ignored (as under `make test &` or nohup in a script), which is what
# test_launch.sh varies.
set -u
B=${1:-build}
BIN=$B/gpt TIMEOUT=60
. "$(dirname "$0")/../lib.sh"
ign=$(awk '/^SigIgn:/ {print $2}' /proc/$$/status)
if (( (16#$ign >> 1) & 1 )); then echo "sigint: ignored"; else echo "sigint: default"; fi
head -n 200 examples/data/eng-fra.tsv > "$tmp/data.tsv"
for sig in INT TERM; do
    want=130
    [ $sig = TERM ] && want=143
    stop_when $sig "step     2" "$tmp/$sig.log" train --data "$tmp/data.tsv" --context 8 --hidden 16 --heads 2 \
        --ffn 32 --layers 1 --batch 4 --eval-every 2 --steps 10000000 --out "$tmp/$sig.safetensors"
    if [ "$stopped_rc" = $want ] && [ -s "$tmp/$sig.safetensors" ]; then ok
    else no "SIG$sig: exit $stopped_rc (want $want), $(tail -n 1 "$tmp/$sig.log")"; fi
done
finish probe
