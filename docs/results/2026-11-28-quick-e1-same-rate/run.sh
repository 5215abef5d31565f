#!/bin/bash
# Quick E1 (2 GiB database, 256 MiB cgroup, scattered hot set, one full compaction, whole window) with every engine's compaction held to the same 600 MiB/s, so the background work matches: quietkv's default against RocksDB's all-direct (as now set) and both-direct.
set -u
BIN=${BIN:?binary}; OUT=${OUT:?out}; mkdir -p "$OUT"
echo "start $(date -u +%T)" >> "$OUT/times.txt"
"$BIN" bench --scale quick --experiment E1 --engines quietkv,rocksdb \
  --modes quietkv:auto,rocksdb:all-direct,rocksdb:both-direct --throttle 600 \
  --repeats 3 --max-reruns 4 --dir /work/bench-scratch/quick --keep-source --out "$OUT" > "$OUT/bench.log" 2>&1
echo "rc=$? end $(date -u +%T)" >> "$OUT/times.txt"
