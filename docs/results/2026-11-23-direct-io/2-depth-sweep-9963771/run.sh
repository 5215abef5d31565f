#!/bin/bash
# doctor at io_depth 1, 2, 4, 8 (io_uring) and the sync engine, interleaved, 3 rounds.
for round in 1 2 3; do
  for cfg in "uring 1" "uring 2" "uring 4" "uring 8" "sync 1"; do
    set -- $cfg
    nice /tmp/dio-quietkv-item3 doctor /work/wt-dio --size 256 --json --io-engine $1 --io-depth $2 \
      > doctor-$1-d$2-$round.json 2> doctor-$1-d$2-$round.err
  done
done
