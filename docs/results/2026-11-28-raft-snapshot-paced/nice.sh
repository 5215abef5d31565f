#!/bin/bash
# The snapshot stream with the joining node at niceness 19: held to 32 MiB/s (buffered and Backup class) against the Backup class unpaced; invocations alternating, 3 rounds.
set -u
cd /work/bench/s12/raft
B=/work/bench/quietkv-raftkv-8f944b9
/work/notes/probe.sh nice-times.txt
for r in 0 1 2; do
  echo "round $r paced $(date -u +%T)" >> nice-times.txt
  $B bench-snapshot --dir /work/bench/raftsnap --repeats 1 --send-mib-per-sec 32 --joiner-nice 19 \
    --modes buffered,backup --out /work/bench/s12/raft/nice-paced32-$r > nice-paced32-$r.log 2>&1
  echo "  rc $?" >> nice-times.txt
  echo "round $r unpaced $(date -u +%T)" >> nice-times.txt
  $B bench-snapshot --dir /work/bench/raftsnap --repeats 1 --joiner-nice 19 \
    --modes backup --out /work/bench/s12/raft/nice-unpaced-$r > nice-unpaced-$r.log 2>&1
  echo "  rc $?" >> nice-times.txt
done
/work/notes/probe.sh nice-times.txt
echo "done $(date -u +%T)" >> nice-times.txt
