#!/bin/bash
# Device-stall calibration: quick E1 with peers (every run kept), then full E1 at 700 MiB/s.
set -u
BIN=${BIN:-quietkv}
OUT=${OUT:-.}
mkdir -p "$OUT"
echo "quick start $(date -u +%T)" >> "$OUT/times.txt"
"$BIN" bench --experiment E1 --engines quietkv,rocksdb \
  --modes quietkv:auto,quietkv:buffered,rocksdb:buffered,rocksdb:all-direct \
  --repeats 3 --keep-disturbed --dir /work/bench-scratch/quick --keep-source --out "$OUT/quick" > "$OUT/quick.log" 2>&1
echo "quick rc=$? end $(date -u +%T)" >> "$OUT/times.txt"
[ -n "${QUICK_ONLY:-}" ] && exit 0
"$BIN" bench --scale full --experiment E1 --engines quietkv,rocksdb --modes quietkv:auto,rocksdb:all-direct \
  --hot-keys 102400 --throttle 700 --repeats 3 --keep-disturbed --dir /work/bench-scratch/full --keep-source --out "$OUT/full" > "$OUT/full.log" 2>&1
echo "full rc=$? end $(date -u +%T)" >> "$OUT/times.txt"
