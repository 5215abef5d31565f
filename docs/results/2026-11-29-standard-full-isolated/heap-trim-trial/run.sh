#!/bin/bash
# One quietkv-only round of the standard workloads at full scale (as the campaign), to see where the reading process's memory goes once the heap is trimmed after every background job.
set -u
BIN=${BIN:-quietkv}; OUT=${OUT:-.}
echo "start $(date -u +%T)" >> "$OUT/times.txt"
"$BIN" bench --experiment standard --scale full --engines quietkv --modes auto \
  --value-size 100 --duration 15 --repeats 1 --dir /work/bench-scratch/standard-full --out "$OUT" > "$OUT/bench.log" 2>&1
echo "rc=$? end $(date -u +%T)" >> "$OUT/times.txt"
