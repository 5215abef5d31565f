#!/bin/bash
# 256 KiB against 512 KiB chunks, Backup class, invocations alternating, 3 rounds.
set -u
cd /work/bench/s36
for r in 0 1 2; do
  for c in 262144 524288; do
    echo "round $r chunk $c $(date +%T)"
    ./quietkv-raftkv-512k bench-snapshot --dir /work/bench/raftsnap --repeats 1 --chunk-bytes $c \
      --modes backup --out /work/bench/s36/c$c-$r > c$c-$r.log 2>&1
    echo "  rc $?"
  done
done
echo "done $(date +%T)"
