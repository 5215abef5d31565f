#!/bin/bash
# Diagnosis, not a product setting: the same stream with the stream's threads at SCHED_IDLE, set from outside once the joiner is up:
# every thread of the joining node, and the leader's runtime threads (tokio-rt-worker: raft, HTTP, the snapshot's reading and sending;
# the readers are threads of their own). Backup class, held to 32 MiB/s and unpaced, invocations alternating, 2 rounds.
set -u
cd /work/bench/s12/raft
B=/work/bench/quietkv-raftkv-8f944b9
idle_them() {
  while ! J=$(pgrep -f -- "--id 2 --addr"); do sleep 0.2; done
  L=$(pgrep -f "bench-snapshot-leader")
  chrt -a -i -p 0 $J > /dev/null
  for t in /proc/$L/task/*; do
    if grep -q tokio-rt-worker $t/comm; then chrt -i -p 0 ${t##*/} > /dev/null; fi
  done
  echo "  idled joiner $J and leader $L's runtime threads $(date -u +%T)" >> idle-times.txt
}
for r in 0 1; do
  for p in 32 0; do
    echo "round $r budget $p $(date -u +%T)" >> idle-times.txt
    $B bench-snapshot --dir /work/bench/raftsnap --repeats 1 --send-mib-per-sec $p \
      --modes backup --out /work/bench/s12/raft/idle$p-$r > idle$p-$r.log 2>&1 &
    P=$!
    idle_them
    wait $P
    echo "  rc $? $(date -u +%T)" >> idle-times.txt
  done
done
