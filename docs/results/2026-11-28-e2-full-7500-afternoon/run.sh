#!/bin/bash
# Full E2, H = 7,500 (29 MiB scattered hot set): quietkv's default at 19 MiB/s of user writes (its background bytes then match RocksDB's at 16) against RocksDB's all-direct as the bench sets it (half the limit as block cache, not filled at flush).
set -u
BIN=${BIN:?binary}; OUT=${OUT:?out}; mkdir -p "$OUT"
echo "start $(date -u +%T)" >> "$OUT/times.txt"
"$BIN" bench --scale full --experiment E2 --hot-keys 7500 --engines quietkv,rocksdb \
  --modes quietkv:auto,rocksdb:all-direct --mode-write-rate quietkv:auto=19 \
  --repeats 3 --max-reruns 6 --dir /work/bench-scratch/full --keep-source --out "$OUT" > "$OUT/bench.log" 2>&1
echo "rc=$? end $(date -u +%T)" >> "$OUT/times.txt"
