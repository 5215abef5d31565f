#!/bin/bash
# One round of quietkv and RocksDB at full scale with binary e011f88 (the device-read counters, before the readahead change), 03:27-03:44 UTC: the cause of the point-read gap, not a quoted comparison.
BIN=${BIN:-quietkv}; OUT=${OUT:-.}
"$BIN" bench --experiment standard --scale full --engines quietkv,rocksdb --modes quietkv:auto,rocksdb:buffered \
  --value-size 100 --duration 15 --repeats 1 --dir /work/bench-scratch/standard-full --out "$OUT" > "$OUT/bench.log" 2>&1
