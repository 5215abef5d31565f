#!/bin/bash
# Quick E5 (direct against buffered and mmap user reads, 2 GiB in a 256 MiB cgroup), 3 interleaved repeats.
set -u
BIN=${BIN:-quietkv}; OUT=${OUT:-.}
"$BIN" bench --experiment E5 --repeats 3 --dir /work/bench-scratch/e5 --out "$OUT"
