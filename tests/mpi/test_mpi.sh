#!/usr/bin/env bash
# tests/mpi/test_mpi.sh BUILD_DIR: training across mpirun's processes
# (examples/common/dist.h; make mpi-test builds the *-mpi programs).
#
#   - gpt: mpirun -np 2 gpt-mpi writes the checkpoint, byte for byte, that
#     one process writes with --parts 2 (dropout on, an odd batch), and not
#     the one --parts 1 writes (the batch really was split); -np 3 is
#     --parts 3;
#   - translate: mpirun -np 2 translate-mpi is translate --threads 2, byte for
#     byte (dropout on);
#   - --resume under mpirun: a run stopped early, then resumed, gives the
#     uninterrupted run's checkpoint, byte for byte (gpt and translate), and
#     so does gpt --parts 2 in one process resuming mpirun's checkpoint;
#   - SIGINT to mpirun: every process stops after the same step, process 0
#     saves and says so once, and --resume from there gives the straight
#     run's bits;
#   - process 0 alone prints: one "wrote" line from gpt;
#   - --parts other than the processes' count is refused, exit 2.
# Prints 'N passed, N failed' as its last line; exits 1 on any failure.
set -u
B=${1:-build}
BIN=$B/gpt-mpi TIMEOUT=120
. "$(dirname "$0")/../lib.sh" # tmp, ok, no, finish
for p in gpt translate translate-mpi; do
    [ -x "$B/$p" ] || { no "$B/$p not found"; finish mpi; exit 1; }
done

# as root in a container, with more processes than cores
mpi() { timeout 120 mpirun --allow-run-as-root --oversubscribe -np "$@"; }
same() { # NAME A B: the two files, byte for byte
    if cmp -s "$2" "$3"; then ok; else no "$1: $2 and $3 differ"; fi
}
differ() {
    if [ -f "$2" ] && [ -f "$3" ] && ! cmp -s "$2" "$3"; then ok; else no "$1: $2 and $3 are the same (or missing)"; fi
}

head -n 300 examples/data/eng-fra.tsv > "$tmp/data.tsv"

# ---- gpt ---------------------------------------------------------------------
gpt=(train --data "$tmp/data.tsv" --context 16 --hidden 32 --heads 2 --ffn 64 --batch 7 --dropout 0.1
     --eval-every 3 --quiet)
for n in 1 2 3; do
    "$B/gpt" "${gpt[@]}" --steps 6 --parts $n --out "$tmp/gpt-parts$n.st" > /dev/null || no "gpt --parts $n failed"
done
mpi 2 "$B/gpt-mpi" "${gpt[@]}" --steps 6 --out "$tmp/gpt-np2.st" > /dev/null || no "mpirun -np 2 gpt-mpi failed"
same "gpt: -np 2 is --parts 2" "$tmp/gpt-np2.st" "$tmp/gpt-parts2.st"
differ "gpt: -np 2 is not --parts 1" "$tmp/gpt-np2.st" "$tmp/gpt-parts1.st"
mpi 3 "$B/gpt-mpi" "${gpt[@]}" --steps 6 --out "$tmp/gpt-np3.st" > /dev/null || no "mpirun -np 3 gpt-mpi failed"
same "gpt: -np 3 is --parts 3" "$tmp/gpt-np3.st" "$tmp/gpt-parts3.st"

# resume: 3 steps, then 3 more from the checkpoint
mpi 2 "$B/gpt-mpi" "${gpt[@]}" --steps 3 --out "$tmp/gpt-half.st" > /dev/null || no "gpt: the first half failed"
mpi 2 "$B/gpt-mpi" train --data "$tmp/data.tsv" --resume "$tmp/gpt-half.st" --steps 6 --batch 7 --eval-every 3 \
    --quiet --out "$tmp/gpt-resumed.st" > /dev/null || no "gpt: --resume under mpirun failed"
same "gpt: resumed under mpirun" "$tmp/gpt-resumed.st" "$tmp/gpt-np2.st"
# the checkpoint goes to one process: --parts 2 continues it with the same bits
"$B/gpt" train --data "$tmp/data.tsv" --resume "$tmp/gpt-half.st" --steps 6 --batch 7 --eval-every 3 --quiet \
    --parts 2 --out "$tmp/gpt-resumed1.st" > /dev/null || no "gpt: --parts 2 --resume of mpirun's checkpoint failed"
same "gpt: mpirun's checkpoint resumed by one process" "$tmp/gpt-resumed1.st" "$tmp/gpt-np2.st"

# a signal: SIGTERM to every process (as a batch system sends it), which all
# stop after the same step; process 0 saves, and resumed the run ends with
# the bits of a straight one.  (mpirun's own SIGINT ends the job after a
# timeout of Open MPI's, which may come before the save: not ours to test.)
long=(train --data "$tmp/data.tsv" --context 16 --hidden 32 --heads 2 --ffn 64 --batch 7 --dropout 0.1
      --steps 100000 --eval-every 5)
start_bg "$tmp/k.log" mpirun --allow-run-as-root --oversubscribe -np 2 "$B/gpt-mpi" "${long[@]}" --out "$tmp/k.st"
pid=$bg_pid
for _ in $(seq 1200); do grep -q '^step ' "$tmp/k.log" || ! kill -0 $pid 2> /dev/null && break; sleep 0.1; done
pkill -TERM -f "gpt-mpi train --data $tmp/data.tsv" || kill -INT $pid
wait_bounded $pid 120
n=$(sed -n 's/.*stopped after step \([0-9]*\);.*/\1/p' "$tmp/k.log")
if [ "$(grep -c 'stopped after step' "$tmp/k.log")" = 1 ] && [ -n "$n" ] && [ -f "$tmp/k.st" ]; then ok
else no "a signal under mpirun: $(head -c 300 "$tmp/k.log")"; n=1; fi
end=$((n + 2))
mpi 2 "$B/gpt-mpi" train --data "$tmp/data.tsv" --resume "$tmp/k.st" --steps $end --batch 7 --eval-every 5 \
    --quiet --out "$tmp/k-resumed.st" > /dev/null || no "gpt: --resume after a signal failed"
mpi 2 "$B/gpt-mpi" "${gpt[@]}" --steps $end --eval-every 5 --out "$tmp/k-straight.st" > /dev/null || no "straight failed"
same "gpt: stopped at step $n by a signal, resumed to $end" "$tmp/k-resumed.st" "$tmp/k-straight.st"

# process 0 alone logs
mpi 2 "$B/gpt-mpi" train --data "$tmp/data.tsv" --context 16 --hidden 32 --heads 2 --ffn 64 --batch 7 --steps 2 \
    --eval-every 2 --out "$tmp/gpt-log.st" > "$tmp/log" 2>&1 || no "gpt: the logged run failed"
if [ "$(grep -c '^wrote ' "$tmp/log")" = 1 ] && [ "$(grep -c '^step ' "$tmp/log")" = 1 ]; then ok
else no "gpt: one log, from process 0: $(head -c 300 "$tmp/log")"; fi

# --parts must be the processes' count
mpi 2 "$B/gpt-mpi" "${gpt[@]}" --steps 2 --parts 3 --out "$tmp/never.st" > /dev/null 2> "$tmp/err"
[ $? != 0 ] && grep -qF -- "--parts 3 under mpirun -np 2" "$tmp/err" && [ ! -e "$tmp/never.st" ] && ok ||
    no "gpt: --parts 3 under -np 2: $(head -c 300 "$tmp/err")"

# ---- translate -----------------------------------------------------------------
head -n 160 examples/data/eng-fra.tsv > "$tmp/pairs.tsv"
tr=(train --data "$tmp/pairs.tsv" --epochs 2 --batch 16 --hidden 32 --ffn 64 --dropout 0.2 --quiet)
"$B/translate" "${tr[@]}" --threads 2 --out "$tmp/tr-threads2.st" > /dev/null || no "translate --threads 2 failed"
"$B/translate" "${tr[@]}" --out "$tmp/tr-threads1.st" > /dev/null || no "translate failed"
mpi 2 "$B/translate-mpi" "${tr[@]}" --out "$tmp/tr-np2.st" > /dev/null || no "mpirun -np 2 translate-mpi failed"
same "translate: -np 2 is --threads 2" "$tmp/tr-np2.st" "$tmp/tr-threads2.st"
differ "translate: -np 2 is not --threads 1" "$tmp/tr-np2.st" "$tmp/tr-threads1.st"
mpi 2 "$B/translate-mpi" "${tr[@]}" --stop-after 1 --out "$tmp/tr-half.st" > /dev/null || no "translate: epoch 1 failed"
mpi 2 "$B/translate-mpi" train --data "$tmp/pairs.tsv" --epochs 2 --batch 16 --quiet --resume "$tmp/tr-half.st" \
    --out "$tmp/tr-resumed.st" > /dev/null || no "translate: --resume under mpirun failed"
same "translate: resumed under mpirun" "$tmp/tr-resumed.st" "$tmp/tr-np2.st"

finish mpi
