#!/bin/bash
# Quick E1 (2 GiB database, 256 MiB cgroup, 8 MiB scattered hot set, one unthrottled full compaction, whole window), 3 interleaved runs each: `auto` writing new tables into free memory down to a 12.5% reserve (the binary's default then) against `auto+room=100` (never, today's default).
set -u
BIN=${BIN:?binary}; OUT=${OUT:?out}; mkdir -p "$OUT"
"$BIN" bench --scale quick --experiment E1 --modes auto,auto+room=100 --repeats 3 --max-reruns 3 \
  --dir /work/bench-scratch/quick --out "$OUT" > "$OUT/bench.log" 2>&1
