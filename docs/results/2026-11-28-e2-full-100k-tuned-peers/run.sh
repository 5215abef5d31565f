#!/bin/bash
# Full E2, H = 100,000 (400 MiB scattered hot set): quietkv's default given 19 MiB/s of user writes (its background bytes then match RocksDB's at 16), against RocksDB's two best tuned configurations (all-direct with a third of the limit as block cache) and fjall at 16.
set -u
BIN=${BIN:?binary}; OUT=${OUT:?out}; mkdir -p "$OUT"
echo "start $(date -u +%T)" >> "$OUT/times.txt"
"$BIN" bench --scale full --experiment E2 --hot-keys 100000 --engines quietkv,rocksdb,fjall \
  --modes quietkv:auto,rocksdb:all-direct,rocksdb:read-direct,fjall:buffered --mode-write-rate quietkv:auto=19 \
  --repeats 3 --max-reruns 6 --dir /work/bench-scratch/full --keep-source --out "$OUT" > "$OUT/bench.log" 2>&1
echo "rc=$? end $(date -u +%T)" >> "$OUT/times.txt"
