#!/bin/bash
# Full E5 at 32 threads (8 GiB, 1 GiB cgroup, uniform point reads), buffered against direct user reads, 3 interleaved runs, with fio's ceiling for 32 synchronous O_DIRECT readers over the same tables before and after.
set -u
BIN=${BIN:?binary}; OUT=${OUT:?out}; SRC=${SRC:?quietkv full source}; mkdir -p "$OUT"
echo "start $(date -u +%T)" >> "$OUT/times.txt"
TAG=" before" SRC="$SRC" "$(dirname "$0")"/fio-ceiling.sh >> "$OUT/fio.txt" 2>&1
"$BIN" bench --scale full --experiment E5 --modes buffered,direct --threads 32 --warmup 20 --duration 60 \
  --repeats 3 --dir /work/bench-scratch/full --keep-source --out "$OUT" > "$OUT/bench.log" 2>&1
echo "rc=$? bench end $(date -u +%T)" >> "$OUT/times.txt"
TAG=" after" SRC="$SRC" "$(dirname "$0")"/fio-ceiling.sh >> "$OUT/fio.txt" 2>&1
echo "end $(date -u +%T)" >> "$OUT/times.txt"
