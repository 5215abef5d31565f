#!/bin/bash
# A/B: write-back started on the kernel's threads (NEW) against in the writer's thread (OLD),
# the standard workloads with 4 KiB values, quietkv only, alternating, 3 rounds.
set -u
OUT=${OUT:-.}; mkdir -p "$OUT"
for r in 0 1 2; do
  for v in NEW OLD; do
    BIN=${!v}
    echo "$v-$r start $(date -u +%T)" >> "$OUT/times.txt"
    "$BIN" bench --experiment standard --engines quietkv --modes quietkv:auto --value-size 4096 --repeats 1 \
      --dir /work/bench-scratch/ab --out "$OUT/$v-$r" > "$OUT/$v-$r.log" 2>&1
    echo "$v-$r rc=$? end $(date -u +%T)" >> "$OUT/times.txt"
  done
done
