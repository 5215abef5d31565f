#!/usr/bin/env bash
# Starts every fuzz target for SECS seconds, all at once, at nice 19.
# Working corpus (grows) in /work/fuzzlogs/<t>/corpus, committed seeds
# read from fuzz/corpus/<t>, crashes in /work/fuzzlogs/<t>/artifacts.
set -euo pipefail
SECS=${SECS:-3600}
cd /work/wt-fuzz/fuzz
BIN=target/x86_64-unknown-linux-gnu/release
if [ $# -gt 0 ]; then targets=("$@"); else targets=($(cd fuzz_targets && ls | sed 's/\.rs$//')); fi
for t in "${targets[@]}"; do
  mkdir -p /work/fuzzlogs/$t/corpus /work/fuzzlogs/$t/artifacts
  # Keep the binary this run uses, so later rebuilds do not change it.
  cp $BIN/$t /work/fuzzlogs/$t/fuzzer
  ( start=$(date +%s)
    nice -n 19 /work/fuzzlogs/$t/fuzzer /work/fuzzlogs/$t/corpus corpus/$t \
      -max_total_time=$SECS -rss_limit_mb=1536 -print_final_stats=1 \
      -artifact_prefix=/work/fuzzlogs/$t/artifacts/ > /work/fuzzlogs/$t.log 2>&1
    echo "exit=$? wall_seconds=$(( $(date +%s) - start ))" >> /work/fuzzlogs/$t.log ) &
done
wait
