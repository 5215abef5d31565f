#!/bin/bash
# Preallocation step: 8 MiB (b40e12a) vs 64 MiB, depth 4 and 8, interleaved, 3 rounds.
for round in 1 2 3; do
  for depth in 4 8; do
    nice /tmp/dio-quietkv-final doctor /work/wt-dio --size 256 --json --io-depth $depth > doctor-step8-d$depth-$round.json 2>/dev/null
    nice /tmp/dio-quietkv-step64 doctor /work/wt-dio --size 256 --json --io-depth $depth > doctor-step64-d$depth-$round.json 2>/dev/null
  done
done
