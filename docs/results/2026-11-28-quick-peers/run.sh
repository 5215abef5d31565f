#!/bin/bash
# Quick E1 and E2 (2 GiB database, 256 MiB cgroup, scattered hot sets) with the tuned peers as the bench now sets them: quietkv's default against RocksDB's all-direct (half the limit as block cache, no flush fill) and read-direct, and fjall.
set -u
BIN=${BIN:?binary}; OUT=${OUT:?out}; mkdir -p "$OUT"
echo "start $(date -u +%T)" >> "$OUT/times.txt"
"$BIN" bench --scale quick --experiment E1,E2 --engines quietkv,rocksdb,fjall \
  --modes quietkv:auto,rocksdb:all-direct,rocksdb:read-direct,fjall:buffered \
  --repeats 3 --max-reruns 4 --dir /work/bench-scratch/quick --keep-source --out "$OUT" > "$OUT/bench.log" 2>&1
echo "rc=$? end $(date -u +%T)" >> "$OUT/times.txt"
