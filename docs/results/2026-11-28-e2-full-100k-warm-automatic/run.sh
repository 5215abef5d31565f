#!/bin/bash
# Full E2, H = 100,000: quietkv's default against the same with automatic compactions' output warmed, both at 19 MiB/s of user writes.
set -u
BIN=${BIN:?binary}; OUT=${OUT:?out}; mkdir -p "$OUT"
echo "start $(date -u +%T)" >> "$OUT/times.txt"
"$BIN" bench --scale full --experiment E2 --hot-keys 100000 --engines quietkv \
  --modes quietkv:auto,quietkv:auto+warmauto=1 --write-rate 19 \
  --repeats 3 --max-reruns 3 --dir /work/bench-scratch/full --keep-source --out "$OUT" > "$OUT/bench.log" 2>&1
echo "rc=$? end $(date -u +%T)" >> "$OUT/times.txt"
