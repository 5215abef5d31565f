#!/bin/bash
# Full E2, H = 100,000: quietkv's default at 19 MiB/s of user writes against RocksDB's all-direct as the bench now sets it (half the limit as block cache, not filled at flush) at 16.
set -u
BIN=${BIN:?binary}; OUT=${OUT:?out}; mkdir -p "$OUT"
echo "start $(date -u +%T)" >> "$OUT/times.txt"
"$BIN" bench --scale full --experiment E2 --hot-keys 100000 --engines quietkv,rocksdb \
  --modes quietkv:auto,rocksdb:all-direct --mode-write-rate quietkv:auto=19 \
  --repeats 3 --max-reruns 4 --dir /work/bench-scratch/full --keep-source --out "$OUT" > "$OUT/bench.log" 2>&1
echo "rc=$? end $(date -u +%T)" >> "$OUT/times.txt"
