#!/bin/bash
# The snapshot stream held to 32 MiB/s (buffered and Backup class) against the Backup class unpaced; invocations alternating, 3 rounds.
set -u
cd /work/bench/s12/raft
B=/work/bench/quietkv-raftkv-39f536d
/work/notes/probe.sh times.txt
for r in 0 1 2; do
  echo "round $r paced $(date -u +%T)" >> times.txt
  $B bench-snapshot --dir /work/bench/raftsnap --repeats 1 --send-mib-per-sec 32 \
    --modes buffered,backup --out /work/bench/s12/raft/paced32-$r > paced32-$r.log 2>&1
  echo "  rc $?" >> times.txt
  echo "round $r unpaced $(date -u +%T)" >> times.txt
  $B bench-snapshot --dir /work/bench/raftsnap --repeats 1 \
    --modes backup --out /work/bench/s12/raft/unpaced-$r > unpaced-$r.log 2>&1
  echo "  rc $?" >> times.txt
done
/work/notes/probe.sh times.txt
echo "done $(date -u +%T)" >> times.txt
