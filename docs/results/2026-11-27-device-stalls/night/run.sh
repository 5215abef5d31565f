#!/bin/bash
# Full E1 at 700 MiB/s, quietkv auto against RocksDB all-direct, with the disturbance rule on and the stall watch measuring each stall against its own queue.
set -u
BIN=${BIN:?binary}; OUT=${OUT:?out}; mkdir -p "$OUT"
echo "start $(date -u +%T)" >> "$OUT/times.txt"
"$BIN" bench --scale full --experiment E1 --engines quietkv,rocksdb --modes quietkv:auto,rocksdb:all-direct \
  --hot-keys 102400 --throttle 700 --repeats 3 --max-reruns 2 --dir /work/bench-scratch/full --keep-source --out "$OUT" > "$OUT/bench.log" 2>&1
echo "rc=$? end $(date -u +%T)" >> "$OUT/times.txt"
