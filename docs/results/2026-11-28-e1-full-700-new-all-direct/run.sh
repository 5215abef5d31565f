#!/bin/bash
# Full E1 held to 700 MiB/s (the README's headline run), quietkv's default against RocksDB's all-direct as the bench now sets it (half the limit as block cache, not filled at flush).
set -u
BIN=${BIN:?binary}; OUT=${OUT:?out}; mkdir -p "$OUT"
echo "start $(date -u +%T)" >> "$OUT/times.txt"
"$BIN" bench --scale full --experiment E1 --engines quietkv,rocksdb --modes quietkv:auto,rocksdb:all-direct \
  --hot-keys 102400 --throttle 700 --repeats 3 --max-reruns 4 --dir /work/bench-scratch/full --keep-source --out "$OUT" > "$OUT/bench.log" 2>&1
echo "rc=$? end $(date -u +%T)" >> "$OUT/times.txt"
