#!/usr/bin/env bash
# tests/cli/test_cli.sh BUILD_DIR: the translate CLI on bad input.
#
#   - every flag with a bad value (negative, zero, non-numeric, out of
#     range, missing) gives a usage message and exit status 2, and does not
#     start any work;
#   - a data file with bad lines (no tab, empty, not UTF-8, 10,000
#     characters, empty columns) trains with a warning naming each line; a
#     file with no usable pair, or none at all, is exit 1 with a message;
#   - a model file of the wrong kind (a valid safetensors file that is not a
#     translator, a truncated model, a text file, an empty file, a
#     directory, a missing file, broken metadata) is exit 1 with a message
#     naming the file, never a crash;
#   - run reads stdin lines of any length and skips, with a warning naming
#     the line, what the data reader refuses (NUL, invalid UTF-8); a line
#     over 4096 bytes is cut to its words and translated, with a warning
#     naming it; exit 1 when no line is good;
#   - inputs from pipes: train from <(cat data), run with --model <(cat
#     model), - for stdin, the same model and output as from the files; a
#     truncated or garbage stream, or one over AG_INPUT_LIMIT, is exit 1
#     with a message naming it; outputs still refuse a FIFO;
#   - --resume: a flag that conflicts with the model is exit 2 naming it and
#     both values; every training-state field of the metadata is checked;
#   - a small file whose metadata declares a huge model is refused before
#     the model is built (time and memory bounded by the file);
#   - a model too large for the memory is reported as out of memory.
# SANITIZED=1 (an ASan build) leaves out the two checks that limit or
# measure memory.
# Prints 'N passed, N failed' as its last line; exits 1 on any failure.
set -u
B=${1:-build}
T=$B/translate
SANITIZED=${SANITIZED:-0}
BIN=$T
. "$(dirname "$0")/../lib.sh" # tmp, ok, no, run, usage, finish

# ---- a tiny model and data to work with ------------------------------------
head -n 60 examples/data/eng-fra.tsv > "$tmp/tiny.tsv"
# (--warmup 0: a run of a few steps is shorter than the default warmup)
small=(--epochs 1 --hidden 8 --heads 2 --ffn 8 --layers 1 --batch 16 --warmup 0 --quiet)
run "train a tiny model" 0 "" train --data "$tmp/tiny.tsv" --out "$tmp/good.safetensors" "${small[@]}"
run "run it" 0 "" run --model "$tmp/good.safetensors" "go ."

# ---- usage: exit 2 and the usage text ------------------------------------------
train=(train --data "$tmp/tiny.tsv" --out "$tmp/never.safetensors")
usage "no arguments"
usage "unknown command" fly --model "$tmp/good.safetensors"
usage "unknown flag" "${train[@]}" --epoch 3
usage "bad precision" "${train[@]}" --precision fp16
usage "train without --data" train --out "$tmp/never.safetensors"
usage "train without --out" train --data "$tmp/tiny.tsv"
usage "eval without --model" eval --data "$tmp/tiny.tsv"
usage "eval without --data" eval --model "$tmp/good.safetensors"
usage "run without --model" run "go ."
usage "a stray argument to train" "${train[@]}" extra
usage "hidden not divisible by heads" "${train[@]}" --hidden 10 --heads 4
usage "unknown optimizer" "${train[@]}" --optimizer rmsprop
usage "--optimizer without a value" "${train[@]}" --optimizer
usage "unknown schedule" "${train[@]}" --schedule exponential
usage "--schedule without a value" "${train[@]}" --schedule
usage "unknown init" "${train[@]}" --init xavier
usage "--init without a value" "${train[@]}" --init
usage "--pre-norm and --post-norm together" "${train[@]}" --pre-norm --post-norm
grep -qF -- "--pre-norm and --post-norm: give one of them" "$tmp/err" && ok || no "--pre-norm --post-norm: $(head -c 200 "$tmp/err")"
split=(split --data "$tmp/tiny.tsv" --train "$tmp/never.tsv" --test "$tmp/never2.tsv")
usage "split without --train" split --data "$tmp/tiny.tsv" --test "$tmp/never2.tsv"
usage "split without --test" split --data "$tmp/tiny.tsv" --train "$tmp/never.tsv"
usage "split without --data" split --train "$tmp/never.tsv" --test "$tmp/never2.tsv"
for v in 1 0 -3 abc ""; do usage "split --every '$v'" "${split[@]}" --every "$v"; done
run "split: a missing file" 1 "nothing.tsv" split --data "$tmp/nothing.tsv" --train "$tmp/never.tsv" --test "$tmp/never2.tsv"
run "split: an unwritable output" 1 "no/such/dir/t.tsv" split --data "$tmp/tiny.tsv" --train "$tmp/no/such/dir/t.tsv" \
    --test "$tmp/never2.tsv"
[ -e "$tmp/never.tsv" ] || [ -e "$tmp/never2.tsv" ] && no "a refused split wrote a file" || ok

# whole-number flags: every one refuses these (0 where 0 means nothing)
for flag in --epochs --batch --hidden --heads --ffn --layers --max-len --min-freq --threads; do
    for v in -1 0 abc 1.5 "" 2x 99999999999999999999 0x10; do
        usage "$flag '$v'" "${train[@]}" "$flag" "$v"
    done
    usage "$flag without a value" "${train[@]}" "$flag"
    usage "$flag followed by a flag" "${train[@]}" "$flag" --quiet
done
usage "--max-len 1 (no room for <eos>)" "${train[@]}" --max-len 1
for flag in --seed --warmup; do # 0 is a fine value for these two
    for v in -1 abc 1.5 "" 99999999999; do usage "$flag '$v'" "${train[@]}" "$flag" "$v"; done
    usage "$flag without a value" "${train[@]}" "$flag"
done

# real-valued flags
for v in 0 -0.1 abc nan inf "" 1e999 1O; do usage "--lr '$v'" "${train[@]}" --lr "$v"; done
for v in -0.1 1 1.5 abc nan ""; do usage "--momentum '$v'" "${train[@]}" --momentum "$v"; done
for v in -0.1 2 abc inf ""; do usage "--weight-decay '$v'" "${train[@]}" --weight-decay "$v"; done
for v in -1 abc nan -inf ""; do usage "--clip '$v'" "${train[@]}" --clip "$v"; done
for v in -0.1 1 abc nan ""; do usage "--dropout '$v'" "${train[@]}" --dropout "$v"; done
for flag in --lr --momentum --weight-decay --clip --dropout; do
    usage "$flag without a value" "${train[@]}" "$flag"
done

# file flags without a value, in each command
for flag in --data --test --out --resume --json --plot; do usage "train $flag without a value" train "$flag"; done
for flag in --model --data --json; do usage "eval $flag without a value" eval "$flag"; done
for flag in --model --attention; do usage "run $flag without a value" run "$flag"; done
usage "eval with a bad flag value" eval --model "$tmp/good.safetensors" --data "$tmp/tiny.tsv" --threads 0
usage "run with a bad flag value" run --model "$tmp/good.safetensors" --threads -2 "go ."

# ---- data files --------------------------------------------------------------------
# one bad line of each kind among good ones; line numbers are 1-based
long=$(head -c 10000 /dev/zero | tr '\0' 'a')
{
    head -n 20 "$tmp/tiny.tsv"          # lines 1-20
    printf 'no tab on this line\n'      # 21
    printf '\n'                         # 22
    printf 'caf\xe9 latin-1\tnot utf-8\n' # 23
    printf '%s\tlong\n' "$long"         # 24
    printf ' \t !\n'                    # 25: no source token
    printf 'Go.\t\n'                    # 26: no target
    sed -n '21,40p' "$tmp/tiny.tsv"     # 27-46
} > "$tmp/bad_lines.tsv"
run "bad lines: training goes on" 0 "" train --data "$tmp/bad_lines.tsv" --out "$tmp/bl.safetensors" "${small[@]}"
for want in "bad_lines.tsv:21: no tab between source and target; line skipped" \
    "bad_lines.tsv:22: empty line; line skipped" \
    "bad_lines.tsv:23: invalid UTF-8 at column 4; line skipped" \
    "bad_lines.tsv:24: line is 10005 bytes long, more than 4096; line skipped" \
    "bad_lines.tsv:25: empty source sentence; line skipped" \
    "bad_lines.tsv:26: empty target sentence; line skipped"; do
    if grep -qF -- "$want" "$tmp/err"; then ok; else no "bad lines: '$want' not in: $(head -c 400 "$tmp/err")"; fi
done
run "bad lines in eval data" 0 "bad_lines.tsv:21: no tab" eval --model "$tmp/good.safetensors" --data "$tmp/bad_lines.tsv"

printf 'no tabs\n\nat all\n' > "$tmp/none.tsv"
run "no usable pairs" 1 "none.tsv: no usable sentence pairs (3 lines skipped; first: " \
    train --data "$tmp/none.tsv" --out "$tmp/never.safetensors" "${small[@]}"
: > "$tmp/empty.tsv"
run "empty data file" 1 "empty.tsv: no usable sentence pairs (the file is empty)" \
    train --data "$tmp/empty.tsv" --out "$tmp/never.safetensors" "${small[@]}"
run "missing data file" 1 "$tmp/nope.tsv: No such file or directory" \
    train --data "$tmp/nope.tsv" --out "$tmp/never.safetensors" "${small[@]}"
run "data file is a directory" 1 "$tmp: " train --data "$tmp" --out "$tmp/never.safetensors" "${small[@]}"
run "missing test file" 1 "$tmp/nope.tsv" \
    train --data "$tmp/tiny.tsv" --test "$tmp/nope.tsv" --out "$tmp/never.safetensors" "${small[@]}"
run "eval on no usable pairs" 1 "none.tsv: no usable sentence pairs" \
    eval --model "$tmp/good.safetensors" --data "$tmp/none.tsv"
[ -e "$tmp/never.safetensors" ] && no "a failed training wrote a model"
run "model into a missing directory" 1 "$tmp/no/such/dir/m.safetensors" \
    train --data "$tmp/tiny.tsv" --out "$tmp/no/such/dir/m.safetensors" "${small[@]}"

# ---- model files of the wrong kind ---------------------------------------------------
# st_file PATH HEADER [DATA_BYTES]: a safetensors file (8-byte little-endian
# header length, the header, then DATA_BYTES zero bytes)
st_file() {
    local h=$2 n i
    n=$(printf '%s' "$h" | LC_ALL=C wc -c)
    {
        for i in 0 1 2 3 4 5 6 7; do printf "\\x$(printf %02x $(((n >> (8 * i)) & 255)))"; done
        printf '%s' "$h"
        head -c "${3:-0}" /dev/zero
    } > "$1"
}
bad_model() { # bad_model NAME FILE WANT_TEXT: run and eval both refuse it
    run "run, $1" 1 "$2" run --model "$2" "go ."
    [ -z "$3" ] || grep -qF -- "$3" "$tmp/err" || no "run, $1: '$3' not in: $(head -c 300 "$tmp/err")"
    run "eval, $1" 1 "$2" eval --model "$2" --data "$tmp/tiny.tsv"
    run "resume, $1" 1 "$2" train --data "$tmp/tiny.tsv" --out "$tmp/never.safetensors" --resume "$2" "${small[@]}"
}
st_file "$tmp/weights.safetensors" '{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}' 8
bad_model "safetensors without metadata" "$tmp/weights.safetensors" "not a translator model (metadata 'format' is missing"
st_file "$tmp/other.safetensors" '{"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[],"data_offsets":[0,4]}}' 4
bad_model "another program's checkpoint" "$tmp/other.safetensors" "metadata 'format' is 'pt'"
size=$(wc -c < "$tmp/good.safetensors")
for cut in 0 7 8 100 $((size / 2)) $((size - 1)); do
    head -c "$cut" "$tmp/good.safetensors" > "$tmp/cut_$cut.safetensors"
    bad_model "model cut to $cut of $size bytes" "$tmp/cut_$cut.safetensors" ""
done
printf 'this is not a model\n' > "$tmp/notes.txt"
bad_model "a text file" "$tmp/notes.txt" "exceeds the limit of 100000000 bytes"
printf 'hi\n' > "$tmp/hi.txt"
bad_model "a 3-byte text file" "$tmp/hi.txt" "file is 3 bytes, shorter than the 8-byte header length"
bad_model "a data file" "$tmp/tiny.tsv" "exceeds the limit"
bad_model "a directory" "$tmp" "Is a directory"
bad_model "a missing file" "$tmp/nope.safetensors" "No such file or directory"
# a model whose data was changed: still a valid file, loads as it is
cp "$tmp/good.safetensors" "$tmp/extra.safetensors"
printf 'x' >> "$tmp/extra.safetensors"
bad_model "a byte appended" "$tmp/extra.safetensors" "1 trailing bytes"

# translator metadata that is missing or broken
V='<pad>\n<bos>\n<eos>\n<unk>\ngo\n.'
meta() { # meta HIDDEN HEADS LAYERS MAX_LEN VOCAB
    printf '{"__metadata__":{"format":"attograd-translator-1","src_vocab":"%s","tgt_vocab":"%s",' "$5" "$5"
    printf '"hidden":"%s","heads":"%s","ffn":"8","layers":"%s","max_len":"%s","dropout":"0.1"}}' "$1" "$2" "$3" "$4"
}
st_file "$tmp/m1.safetensors" "$(meta 8 2 1 10 "$V")"
bad_model "translator metadata, no weights" "$tmp/m1.safetensors" "tensor 'encoder.embedding.weight': not in the file"
st_file "$tmp/m2.safetensors" "$(meta eight 2 1 10 "$V")"
bad_model "hidden is not a number" "$tmp/m2.safetensors" "metadata 'hidden' is 'eight', want a whole number from 1 to 4096"
st_file "$tmp/m3.safetensors" "$(meta 8 2 -1 10 "$V")"
bad_model "negative layers" "$tmp/m3.safetensors" "metadata 'layers' is '-1', want a whole number from 1 to 64"
st_file "$tmp/m4.safetensors" "$(meta 8 2 1 10 'go\n.')"
bad_model "vocabulary without its specials" "$tmp/m4.safetensors" "bad vocabulary"
st_file "$tmp/m5.safetensors" '{"__metadata__":{"format":"attograd-translator-1","hidden":"8"}}'
bad_model "config half missing" "$tmp/m5.safetensors" "metadata 'heads' is missing"
# a config out of range: exit 1 and a message naming the file and the value
for cfg in "8 0 1 10|metadata 'heads' is '0'" "10 4 1 10|metadata hidden 10 is not divisible by heads 4" \
           "8 2 0 10|metadata 'layers' is '0'" "8 2 1 0|metadata 'max_len' is '0'" \
           "8 2 100000 10|metadata 'layers' is '100000', want a whole number from 1 to 64"; do
    want=${cfg#*|}
    set -- ${cfg%%|*}
    st_file "$tmp/m6.safetensors" "$(meta "$1" "$2" "$3" "$4" "$V")"
    run "config $1 $2 $3 $4" 1 "m6.safetensors: $want" run --model "$tmp/m6.safetensors" "go ."
done

# ---- run: lines as the data reader takes them ------------------------------------------
in_has() { # in_has NAME TEXT: TEXT is in what the last run_in printed on stderr
    if grep -qF -- "$2" "$tmp/err"; then ok; else no "$1: '$2' not in: $(head -c 400 "$tmp/err")"; fi
}
run_in() { # run_in NAME WANT_STATUS INPUT ARGS...: run with stdin from INPUT
    local name=$1 want=$2 input=$3
    shift 3
    timeout 60 "$T" "$@" < "$input" > "$tmp/out" 2> "$tmp/err"
    local got=$?
    if [ "$got" = "$want" ]; then ok; else no "$name: exit $got, want $want ($(head -c 300 "$tmp/err"))"; fi
}
"$T" run --model "$tmp/good.safetensors" "go ." "i lost ." > "$tmp/two.txt" 2>&1
words=$(for i in $(seq 1000); do printf 'go . '; done) # 5000 bytes of good UTF-8
"$T" run --model "$tmp/good.safetensors" "$(for i in $(seq 100); do printf 'go . '; done)" > "$tmp/words.txt" 2>&1
{
    printf 'go .\n'                    # 1
    printf '%s\n' "$words"             # 2: longer than a line may be
    printf 'caf\xe9 .\n'               # 3
    printf 'go\0 .\n'                  # 4
    printf 'i lost .\r\n'              # 5: a CRLF line
} > "$tmp/lines.txt"
run_in "run: stdin with bad lines" 0 "$tmp/lines.txt" run --model "$tmp/good.safetensors"
# line 2 is cut to its first 4094 bytes (819 words), translated as the same words in a shorter line
# are: the model reads its first max_len tokens either way
if [ "$(wc -l < "$tmp/out")" = 5 ] && [ "$(sed -n 1p "$tmp/out")" = "$(sed -n 1p "$tmp/two.txt")" ] &&
   [ "$(sed -n 2p "$tmp/out")" = "$(cat "$tmp/words.txt")" ] &&
   [ "$(sed -n 5p "$tmp/out")" = "$(sed -n 2p "$tmp/two.txt")" ] && [ -z "$(sed -n 3,4p "$tmp/out" | tr -d '\n')" ]
then ok; else no "run: 5 lines in, want 5 out (lines 3-4 empty): $(head -c 300 "$tmp/out")"; fi
in_has "run: stdin" "stdin:2: line is 5000 bytes long; translating its first 4094 bytes (the model reads at most"
in_has "run: stdin" "stdin:3: invalid UTF-8 at column 4; line skipped"
in_has "run: stdin" "stdin:4: NUL byte at column 3; line skipped"
run "run: a long argument" 0 "argument 1: line is 5000 bytes long; translating its first 4094 bytes" \
    run --model "$tmp/good.safetensors" "$words"
if [ "$(cat "$tmp/out")" = "$(cat "$tmp/words.txt")" ]; then ok; else no "run: a long argument: $(head -c 300 "$tmp/out")"; fi
printf '%s\n' "$(head -c 3000 /dev/zero | tr '\0' 'a')" > "$tmp/long_word.txt"
run_in "run: a 3000-byte line" 0 "$tmp/long_word.txt" run --model "$tmp/good.safetensors"
[ "$(wc -l < "$tmp/out")" = 1 ] && ok || no "run: one 3000-byte line gave $(wc -l < "$tmp/out") lines"
printf 'caf\xe9\n\xff\n' > "$tmp/all_bad.txt"
run_in "run: no good line" 1 "$tmp/all_bad.txt" run --model "$tmp/good.safetensors"
in_has "run: no good line" "no line to translate (2 skipped)"
run "run: a bad argument" 0 "argument 2: invalid UTF-8 at column 4; line skipped" \
    run --model "$tmp/good.safetensors" "go ." "$(printf 'caf\xe9')" "i lost ."
if [ "$(sed -n 1p "$tmp/out")" = "$(sed -n 1p "$tmp/two.txt")" ] && [ -z "$(sed -n 2p "$tmp/out")" ] &&
   [ "$(sed -n 3p "$tmp/out")" = "$(sed -n 2p "$tmp/two.txt")" ]
then ok; else no "run: a bad argument in the middle: $(head -c 300 "$tmp/out")"; fi

# ---- --resume: flags against the model, and its training state -------------------------
resume=(train --data "$tmp/tiny.tsv" --out "$tmp/never.safetensors" --resume "$tmp/good.safetensors" --epochs 2 --quiet)
run "resume: conflicting architecture" 2 "--hidden 64 conflicts with --resume $tmp/good.safetensors, saved with hidden 8" \
    "${resume[@]}" --hidden 64 --layers 3
in_has "resume: conflicts" "--layers 3 conflicts with --resume $tmp/good.safetensors, saved with layers 1"
for flag in "--heads 4|heads 2" "--ffn 16|ffn 8" "--max-len 12|max_len 10" "--dropout 0.2|dropout 0.1" \
            "--min-freq 1|min_freq 2" "--optimizer adam|optimizer sgd" "--init d2l|init scaled"; do
    set -- ${flag%%|*}
    run "resume: $1 $2" 2 "$1 $2 conflicts with --resume $tmp/good.safetensors, saved with ${flag#*|}" "${resume[@]}" "$1" "$2"
done
# the norm is one setting with two flags: the message names the flag given
run "resume: --post-norm" 2 "--post-norm conflicts with --resume $tmp/good.safetensors, saved with pre_norm 1 (pre-norm blocks)" \
    "${resume[@]}" --post-norm
in_has "resume: --post-norm" "leave it out to continue the model as it was saved"
run "resume: the saved values are no conflict" 0 "" train --data "$tmp/tiny.tsv" --out "$tmp/resumed.safetensors" \
    --resume "$tmp/good.safetensors" --epochs 2 --quiet --hidden 8 --heads 2 --ffn 8 --layers 1 --min-freq 2 --optimizer sgd \
    --pre-norm
run "resume: no flags, the saved model" 0 "" train --data "$tmp/tiny.tsv" --out "$tmp/resumed2.safetensors" \
    --resume "$tmp/good.safetensors" --epochs 2 --quiet --warmup 0 --batch 16
cmp -s "$tmp/resumed.safetensors" "$tmp/resumed2.safetensors" && no "resume: --warmup/--batch made no difference" || ok
# the vocabularies were built with the saved min_freq: a resumed run keeps it
run "train with --min-freq 1" 0 "" train --data "$tmp/tiny.tsv" --out "$tmp/mf1.safetensors" "${small[@]}" --min-freq 1
run "resume it without --min-freq" 0 "" train --data "$tmp/tiny.tsv" --out "$tmp/mf1r.safetensors" \
    --resume "$tmp/mf1.safetensors" --epochs 2 --quiet
if grep -aq '"min_freq":"1"' "$tmp/mf1r.safetensors"; then ok; else no "resume rewrote the saved min_freq 1"; fi
[ -s "$tmp/resumed2.safetensors" ] && ok || no "resume without flags wrote no model"

# --init d2l is saved, kept by --resume, and checked against a given --init
run "train with --init d2l" 0 "" train --data "$tmp/tiny.tsv" --out "$tmp/d2l.safetensors" "${small[@]}" --init d2l
run "resume it without --init" 0 "" train --data "$tmp/tiny.tsv" --out "$tmp/d2lr.safetensors" \
    --resume "$tmp/d2l.safetensors" --epochs 2 --quiet
if grep -aq '"init":"d2l"' "$tmp/d2lr.safetensors"; then ok; else no "resume lost the saved init d2l"; fi
run "resume: --init scaled" 2 "--init scaled conflicts with --resume $tmp/d2l.safetensors, saved with init d2l" \
    train --data "$tmp/tiny.tsv" --out "$tmp/never.safetensors" --resume "$tmp/d2l.safetensors" --epochs 2 --init scaled

# set_meta IN OUT KEY VALUE: IN with metadata KEY set to VALUE (KEY must be in it)
set_meta() {
    local n h
    n=$(od -An -t u8 -N 8 "$1" | tr -d ' ')
    h=$(tail -c +9 "$1" | head -c "$n" | sed "s/\"$3\":\"[^\"]*\"/\"$3\":\"$4\"/")
    st_file "$2" "$h"
    tail -c +$((9 + n)) "$1" >> "$2"
}
set_meta "$tmp/good.safetensors" "$tmp/same.safetensors" epoch 1
run "set_meta keeps a model whole" 0 "" run --model "$tmp/same.safetensors" "go ."
for kv in "optimizer_steps|abc|a whole number from 0 to 9007199254740992" "optimizer_steps|-1|" \
          "optimizer_steps|9223372036854775807|" "optimizer_steps||" "optimizer_steps| 4|" "optimizer_steps|4x|" \
          "epoch|-1|a whole number from 0 to 100000" "epoch|one|" "min_freq|0|a whole number from 1 to 1000000" \
          "optimizer|rmsprop|one of: sgd adam" "data_rng|00|64 hex digits" \
          "graph_rng|zz3ca29a09bb0ad5e7ad1e0e5fe1ca4b7f2a3c70dc0a1bd4d6dc3e8bb95b4fe1|64 hex digits"; do
    IFS='|' read -r key val want <<< "$kv"
    set_meta "$tmp/good.safetensors" "$tmp/meta.safetensors" "$key" "$val"
    run "resume: metadata $key '$val'" 1 "meta.safetensors: metadata '$key' is '$val', want $want" \
        train --data "$tmp/tiny.tsv" --out "$tmp/never.safetensors" --resume "$tmp/meta.safetensors" --epochs 2 --quiet
done
for val in "" xavier D2L "d2l "; do
    set_meta "$tmp/d2l.safetensors" "$tmp/meta.safetensors" init "$val"
    run "run: metadata init '$val'" 1 "meta.safetensors: metadata 'init' is '$val', want one of: scaled d2l" \
        run --model "$tmp/meta.safetensors" "go ."
done
for val in "" abc 1 -0.1 nan inf 0.1x; do
    set_meta "$tmp/good.safetensors" "$tmp/meta.safetensors" dropout "$val"
    run "run: metadata dropout '$val'" 1 "meta.safetensors: metadata 'dropout' is '$val', want a number in [0, 1)" \
        run --model "$tmp/meta.safetensors" "go ."
done

# ---- a small file that declares a huge model -------------------------------------------------
# 100,004 tokens at hidden 1024 would be 2 x 400 MB of embeddings alone: the
# tensors are compared with what the metadata implies before anything is built.
vocab=$(printf '<pad>\n<bos>\n<eos>\n<unk>\n'; seq 1 100000 | sed 's/^/w/')
vocab=$(printf '%s' "$vocab" | awk 'BEGIN { ORS = "" } { if (NR > 1) printf "\\n"; print }')
st_file "$tmp/huge.safetensors" "$(printf '{"__metadata__":{"format":"attograd-translator-1","src_vocab":"%s","tgt_vocab":"%s","hidden":"1024","heads":"8","ffn":"4096","layers":"6","max_len":"512","dropout":"0.1"},"encoder.embedding.weight":{"dtype":"F32","shape":[2500,8],"data_offsets":[0,80000]}}' "$vocab" "$vocab")" 80000
size=$(wc -c < "$tmp/huge.safetensors")
want="tensor 'encoder.embedding.weight' is [2500, 8], but the metadata (vocabularies 100004 and 100004 tokens, hidden 1024, ffn 4096) makes it [100004, 1024]"
if [ "$SANITIZED" = 1 ] || [ ! -x /usr/bin/time ]; then
    run "a huge model declared by a small file" 1 "$want" run --model "$tmp/huge.safetensors" "go ."
else
    /usr/bin/time -f '%M %e' -o "$tmp/time" "$T" run --model "$tmp/huge.safetensors" "go ." > /dev/null 2> "$tmp/err"
    rc=$?
    read -r kb secs < <(tail -n 1 "$tmp/time")
    [ "$rc" = 1 ] && ok || no "a huge model declared by a small file: exit $rc"
    in_has "a huge model declared by a small file" "$want"
    # the file is read, its vocabularies parsed: a few times its size, never the model's
    if [ "$kb" -lt $((16 * size / 1024 + 16384)) ]; then ok
    else no "a $size-byte file that declares a huge model took $kb KB (max RSS)"; fi
    echo "cli: a $size-byte file declaring a 100k vocabulary at hidden 1024: refused in $secs s, max RSS $kb KB"
fi

# ---- out of memory is said so ---------------------------------------------------------------
if [ "$SANITIZED" != 1 ]; then
    (ulimit -v 300000; exec timeout 60 "$T" train --data "$tmp/tiny.tsv" --out "$tmp/never.safetensors" --hidden 4096 \
        --heads 4 --ffn 16384 --layers 64 --quiet) > /dev/null 2> "$tmp/err"
    rc=$?
    if [ "$rc" = 1 ] && grep -q "cannot build the model: .*out of memory" "$tmp/err" && ! grep -q "bad argument" "$tmp/err"
    then ok; else no "a model larger than the memory: exit $rc, $(head -c 300 "$tmp/err")"; fi
fi

[ -e "$tmp/never.safetensors" ] && no "a refused model led to a written model"
# split writes through the crash-safe writer: a FIFO at --train is refused
# and stays a FIFO; a FIFO as --data with no writer is an empty stream at
# once (never a hang)
mkfifo "$tmp/split.fifo"
run "split --train into a FIFO" 1 "not a regular file" split --data "$tmp/tiny.tsv" --train "$tmp/split.fifo" \
    --test "$tmp/never2.tsv"
if [ -p "$tmp/split.fifo" ]; then ok; else no "split replaced the FIFO at --train"; fi
run "split --data from a FIFO with no writer" 1 "split.fifo: no usable sentence pairs (the file is empty)" \
    split --data "$tmp/split.fifo" --train "$tmp/never.tsv" --test "$tmp/never2.tsv"
run "train --out into a FIFO" 1 "not a regular file" train --data "$tmp/tiny.tsv" --out "$tmp/split.fifo" \
    "${small[@]}"
if [ -p "$tmp/split.fifo" ]; then ok; else no "train replaced the FIFO at --out"; fi

# ---- inputs from pipes: read to the end, checked as files ------------------------------
run "train --data <(cat)" 0 "" train --data <(cat "$tmp/tiny.tsv") --out "$tmp/piped.safetensors" "${small[@]}"
if cmp -s "$tmp/good.safetensors" "$tmp/piped.safetensors"; then ok; else no "a piped --data trained another model"; fi
run "train --data <(cat) --test <(cat)" 0 "" train --data <(cat "$tmp/tiny.tsv") --test <(head -n 20 "$tmp/tiny.tsv") \
    --out "$tmp/piped2.safetensors" "${small[@]}"
run "run --model <(cat)" 0 "" run --model <(cat "$tmp/good.safetensors") "go ." "i lost ."
if cmp -s "$tmp/out" "$tmp/two.txt"; then ok; else no "run --model <(cat) translated otherwise: $(head -c 200 "$tmp/out")"; fi
run_in "run --model - (stdin)" 0 "$tmp/good.safetensors" run --model - "go ." "i lost ."
if cmp -s "$tmp/out" "$tmp/two.txt"; then ok; else no "run --model - translated otherwise: $(head -c 200 "$tmp/out")"; fi
run_in "eval --data - (stdin)" 0 "$tmp/tiny.tsv" eval --model "$tmp/good.safetensors" --data -
"$T" eval --model "$tmp/good.safetensors" --data "$tmp/tiny.tsv" > "$tmp/eval_file.txt" 2>&1
if [ "$(sed 's|/dev/stdin|DATA|' "$tmp/out")" = "$(sed "s|$tmp/tiny.tsv|DATA|" "$tmp/eval_file.txt")" ]; then ok
else no "eval --data - printed otherwise: $(head -c 200 "$tmp/out")"; fi
run "resume --resume <(cat)" 0 "" train --data "$tmp/tiny.tsv" --out "$tmp/resumed.safetensors" \
    --resume <(cat "$tmp/good.safetensors") --epochs 2 --quiet
usage "run --model - with sentences on stdin" run --model -
usage "two inputs from stdin" train --data - --test - --out "$tmp/never.safetensors"
run "run --model: a truncated stream" 1 "/dev/fd/" run --model <(head -c 1000 "$tmp/good.safetensors") "go ."
grep -qF "runs past the end of the file" "$tmp/err" && ok || no "truncated stream: $(head -c 300 "$tmp/err")"
run "run --model: a garbage stream" 1 "exceeds the limit of 100000000 bytes" run --model <(printf 'not a model at all') "go ."
AG_INPUT_LIMIT=1000 run "train --data: a stream over the limit" 1 \
    "the stream holds more than the input limit of 1000 bytes (AG_INPUT_LIMIT): refused" \
    train --data <(cat "$tmp/tiny.tsv") --out "$tmp/never.safetensors" "${small[@]}"
AG_INPUT_LIMIT=1000 run "run --model: a file over the limit" 1 "bytes, more than the input limit of 1000 bytes" \
    run --model "$tmp/good.safetensors" "go ."
[ -e "$tmp/never.safetensors" ] && no "a refused input led to a written model"

finish cli
