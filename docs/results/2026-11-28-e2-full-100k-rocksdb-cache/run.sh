#!/bin/bash
# Full E2, H = 100,000: quietkv's default at 19 MiB/s of user writes against RocksDB all-direct without flush-filled cache, at a third and at half of the memory limit, at 16.
set -u
BIN=${BIN:?binary}; OUT=${OUT:?out}; mkdir -p "$OUT"
echo "start $(date -u +%T)" >> "$OUT/times.txt"
"$BIN" bench --scale full --experiment E2 --hot-keys 100000 --engines quietkv,rocksdb \
  --modes quietkv:auto,rocksdb:all-direct+prepopulate=0,rocksdb:all-direct+cache=0.5+prepopulate=0 --mode-write-rate quietkv:auto=19 \
  --repeats 3 --max-reruns 6 --dir /work/bench-scratch/full --keep-source --out "$OUT" > "$OUT/bench.log" 2>&1
echo "rc=$? end $(date -u +%T)" >> "$OUT/times.txt"
