#!/bin/bash
# The stream at the bench's new default chunk (512 KiB, a node's default):
# buffered against the Backup class, 3 rounds.
set -u
cd /work/bench/s36
./quietkv-raftkv-512k bench-snapshot --dir /work/bench/raftsnap --repeats 3 \
  --out /work/bench/s36/final > final.log 2>&1
echo "rc $? $(date +%T)"
