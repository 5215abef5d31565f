#!/bin/bash
# Interleaved: base (21f6731) and item1 (page-aligned buffers), 3 rounds.
for round in 1 2 3; do
  for bin in base item1; do
    nice /tmp/dio-quietkv-$bin doctor /work/wt-dio --size 256 --json > doctor-$bin-$round.json 2> doctor-$bin-$round.err
  done
done
