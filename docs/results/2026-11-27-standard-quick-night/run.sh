#!/bin/bash
# The standard workloads, quick scale, quietkv's defaults against RocksDB and fjall buffered, 100 B and 4 KiB values, 3 interleaved rounds.
set -u
BIN=${BIN:-quietkv}; OUT=${OUT:-.}
"$BIN" bench --experiment standard --engines quietkv,rocksdb,fjall --modes quietkv:auto,rocksdb:buffered,fjall:buffered \
  --value-size 100,4096 --repeats 3 --dir /work/bench-scratch/standard --out "$OUT"
