#!/bin/bash
# With the disturbed-run rule: the leader sending from its own threads (normal) against the idle sender with the joiner at the idle policy,
# 128 KiB chunks held to 32 MiB/s; invocations alternate, 3 rounds; disturbed runs are run again.
set -u
cd /work/bench/s13/raft2
B=/work/bench/quietkv-raftkv-36312aa  # cargo build --release -p quietkv-raftkv at d7bf53b
P="--dir /work/bench/raftsnap --repeats 1 --max-reruns 3 --send-mib-per-sec 32 --chunk-bytes 131072"
/work/notes/probe.sh times.txt
for r in 0 1 2; do
  echo "round $r normal $(date -u +%T)" >> times.txt
  $B bench-snapshot $P --send-priority normal --modes backup --out normal-$r > normal-$r.log 2>&1
  echo "  rc $?" >> times.txt
  echo "round $r idle $(date -u +%T)" >> times.txt
  $B bench-snapshot $P --send-priority idle --joiner-idle --modes buffered,backup --out idle-$r > idle-$r.log 2>&1
  echo "  rc $?" >> times.txt
done
/work/notes/probe.sh times.txt
echo "done $(date -u +%T)" >> times.txt
# Then, since round 1 of the leader's-threads configuration had used all its reruns on disk holds (13:51-13:53 UTC):
#   cd /work/bench/s13/raft2; $B bench-snapshot $P --send-priority normal --modes backup --out normal-3
