#!/bin/bash
# The stream held to 32 MiB/s in the Backup class with smaller chunks than 512 KiB: 3 rounds in one invocation.
# Run as CHUNK=131072 (out chunk128k, first run as small32, 11:11-11:17 UTC) and CHUNK=65536 (out chunk64k, first run as small64, 11:24-11:32 UTC).
set -u
CHUNK=${CHUNK:?chunk bytes}
OUT=$([ "$CHUNK" = 131072 ] && echo chunk128k || echo chunk64k)
cd /work/bench/s12/raft
echo "$OUT $(date -u +%T)" >> $OUT-times.txt
/work/bench/quietkv-raftkv-8f944b9 bench-snapshot --dir /work/bench/raftsnap --repeats 3 --send-mib-per-sec 32 \
    --chunk-bytes $CHUNK --modes backup --out /work/bench/s12/raft/$OUT > $OUT.log 2>&1
echo "  rc $? $(date -u +%T)" >> $OUT-times.txt
