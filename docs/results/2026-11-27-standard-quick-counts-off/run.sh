#!/bin/bash
# The standard workloads, quick scale, both value sizes, with the peers.
set -u
BIN=${BIN:-quietkv}
OUT=${OUT:-.}
mkdir -p "$OUT"
echo "start $(date -u +%T)" > "$OUT/times.txt"
"$BIN" bench --experiment standard --engines quietkv,rocksdb,fjall \
  --modes quietkv:auto,rocksdb:buffered,fjall:buffered \
  --value-size 100,4096 --repeats 3 --dir /work/bench-scratch/standard --out "$OUT" > "$OUT/bench.log" 2>&1
echo "rc=$? end $(date -u +%T)" >> "$OUT/times.txt"
