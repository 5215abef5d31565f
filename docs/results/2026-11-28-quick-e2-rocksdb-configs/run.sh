#!/bin/bash
# Quick E2 (2 GiB database, 256 MiB cgroup, 7,500 scattered hot keys, a writer at 16 MiB/s): quietkv's default against RocksDB's buffered, both-direct and all-direct (as now set).
set -u
BIN=${BIN:?binary}; OUT=${OUT:?out}; mkdir -p "$OUT"
echo "start $(date -u +%T)" >> "$OUT/times.txt"
"$BIN" bench --scale quick --experiment E2 --engines quietkv,rocksdb \
  --modes quietkv:auto,rocksdb:buffered,rocksdb:both-direct,rocksdb:all-direct \
  --repeats 3 --max-reruns 4 --dir /work/bench-scratch/quick --keep-source --out "$OUT" > "$OUT/bench.log" 2>&1
echo "rc=$? end $(date -u +%T)" >> "$OUT/times.txt"
