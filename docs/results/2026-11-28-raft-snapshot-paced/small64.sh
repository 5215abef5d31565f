#!/bin/bash
# The stream held to 32 MiB/s in the Backup class with 64 KiB chunks instead of 512 KiB: 3 rounds in one invocation.
set -u
cd /work/bench/s12/raft
echo "small64 $(date -u +%T)" >> small64-times.txt
/work/bench/quietkv-raftkv-8f944b9 bench-snapshot --dir /work/bench/raftsnap --repeats 3 --send-mib-per-sec 32 \
    --chunk-bytes 65536 --modes backup --out /work/bench/s12/raft/small64 > small64.log 2>&1
echo "  rc $? $(date -u +%T)" >> small64-times.txt
