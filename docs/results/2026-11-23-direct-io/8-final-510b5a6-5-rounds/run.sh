#!/bin/bash
# Interleaved, 5 rounds, doctor --size 256 on /work/wt-dio:
#   base       = 21f6731 (before issue 8)
#   item1      = 4aac165 (page-aligned buffers only)
#   final      = 510b5a6 (io_uring write-behind/read-ahead, depth 4, preallocating table writers)
#   final-sync = 510b5a6 --io-engine sync (the fallback path)
for round in 1 2 3 4 5; do
  nice /tmp/dio-quietkv-base doctor /work/wt-dio --size 256 --json > doctor-base-$round.json 2> doctor-base-$round.err
  nice /tmp/dio-quietkv-item1 doctor /work/wt-dio --size 256 --json > doctor-item1-$round.json 2> doctor-item1-$round.err
  nice /tmp/dio-quietkv-510b5a6 doctor /work/wt-dio --size 256 --json > doctor-final-$round.json 2> doctor-final-$round.err
  nice /tmp/dio-quietkv-510b5a6 doctor /work/wt-dio --size 256 --json --io-engine sync > doctor-final-sync-$round.json 2> doctor-final-sync-$round.err
done
