#!/bin/bash
# The standard workloads at quick scale (in memory, no cgroup), both value sizes, quietkv (data blocks aligned to pages, the default) against RocksDB and fjall buffered, 3 interleaved rounds: the run behind the README's in-memory line, repeated with the alignment.
set -u
BIN=${BIN:-quietkv}; OUT=${OUT:-.}
echo "start $(date -u +%T)" >> "$OUT/times.txt"
"$BIN" bench --experiment standard --engines quietkv,rocksdb,fjall --modes quietkv:auto,rocksdb:buffered,fjall:buffered \
  --value-size 100,4096 --repeats 3 --dir /work/bench-scratch/standard --out "$OUT" > "$OUT/bench.log" 2>&1
echo "rc=$? end $(date -u +%T)" >> "$OUT/times.txt"
