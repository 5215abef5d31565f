#!/bin/bash
# A/B: evicted blocks released after the block-cache shard lock (NEW) against under it (OLD),
# the standard workloads with 100 B and 4 KiB values, quietkv only, alternating, 3 rounds.
set -u
OUT=${OUT:?out}; mkdir -p "$OUT"
for r in 0 1 2; do
  for v in NEW OLD; do
    BIN=${!v}
    echo "$v-$r start $(date -u +%T)" >> "$OUT/times.txt"
    "$BIN" bench --experiment standard --engines quietkv --modes quietkv:auto --value-size 100,4096 --repeats 1 \
      --dir /work/bench-scratch/ab --out "$OUT/$v-$r" > "$OUT/$v-$r.log" 2>&1
    echo "$v-$r rc=$? end $(date -u +%T)" >> "$OUT/times.txt"
  done
done
