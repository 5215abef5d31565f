#!/bin/bash
# The leader sending its snapshot from a thread at the idle CPU priority, with the joiner at its normal policy or at the idle one,
# against the leader's own threads sending (as before); 128 KiB chunks held to 32 MiB/s; plus the idle pair unpaced at 512 KiB.
# Invocations alternate, 3 rounds.
set -u
cd /work/bench/s13/raft
B=/work/bench/quietkv-raftkv-072d241  # cargo build --release -p quietkv-raftkv at 072d241
P="--dir /work/bench/raftsnap --repeats 1"
/work/notes/probe.sh times.txt
for r in 0 1 2; do
  echo "round $r normal $(date -u +%T)" >> times.txt
  $B bench-snapshot $P --send-mib-per-sec 32 --chunk-bytes 131072 --send-priority normal --modes backup --out normal-$r > normal-$r.log 2>&1
  echo "  rc $?" >> times.txt
  echo "round $r idle $(date -u +%T)" >> times.txt
  $B bench-snapshot $P --send-mib-per-sec 32 --chunk-bytes 131072 --send-priority idle --modes backup --out idle-$r > idle-$r.log 2>&1
  echo "  rc $?" >> times.txt
  echo "round $r idlejoin $(date -u +%T)" >> times.txt
  $B bench-snapshot $P --send-mib-per-sec 32 --chunk-bytes 131072 --send-priority idle --joiner-idle --modes buffered,backup --out idlejoin-$r > idlejoin-$r.log 2>&1
  echo "  rc $?" >> times.txt
  echo "round $r unpaced $(date -u +%T)" >> times.txt
  $B bench-snapshot $P --send-priority idle --joiner-idle --modes backup --out unpaced-$r > unpaced-$r.log 2>&1
  echo "  rc $?" >> times.txt
done
/work/notes/probe.sh times.txt
echo "done $(date -u +%T)" >> times.txt
