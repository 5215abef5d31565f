#!/bin/bash
# Who holds the CPU when the leader's readers wait, during a stream held to 32 MiB/s (Backup class): perf sched record for 15 s in the stream.
set -u
cd /work/bench/s12/raft
B=/work/bench/quietkv-raftkv-8f944b9
$B bench-snapshot --dir /work/bench/raftsnap --repeats 1 --send-mib-per-sec 32 \
    --modes backup --out /work/bench/s12/raft/sched32 > sched32.log 2>&1 &
P=$!
while ! pgrep -f -- "--id 2 --addr" > /dev/null; do sleep 1; if ! kill -0 $P 2>/dev/null; then echo "bench ended"; exit 1; fi; done
sleep 10
perf sched record -a -o /work/bench/s12/raft/sched.data -- sleep 15 > perf.log 2>&1
wait $P
echo "rc $? $(date -u +%T)" >> sched-times.txt
