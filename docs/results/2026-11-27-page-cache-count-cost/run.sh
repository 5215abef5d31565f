#!/bin/bash
# quietkv's default (then counting user reads' page-cache hits) against the same with the count off, the standard workloads, both value sizes, 3 interleaved rounds.
set -u
BIN=${BIN:-quietkv}; OUT=${OUT:-.}
"$BIN" bench --experiment standard --engines quietkv --modes quietkv:auto,quietkv:auto+hits=0 --value-size 100,4096 --repeats 3 \
  --dir /work/bench-scratch/standard --out "$OUT"
