#!/bin/bash
# The standard workloads, quick scale, quietkv's defaults against RocksDB and fjall buffered, 100 B and 4 KiB values, 3 interleaved rounds, now with each engine's L0 tables after every write phase's catch-up.
set -u
BIN=${BIN:-quietkv}; OUT=${OUT:-.}
echo "start $(date -u +%T)" >> "$OUT/times.txt"
"$BIN" bench --experiment standard --engines quietkv,rocksdb,fjall --modes quietkv:auto,rocksdb:buffered,fjall:buffered \
  --value-size 100,4096 --repeats 3 --dir /work/bench-scratch/standard --out "$OUT" > "$OUT/bench.log" 2>&1
echo "rc=$? end $(date -u +%T)" >> "$OUT/times.txt"
