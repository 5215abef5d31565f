#!/usr/bin/env bash
# One markdown row per target from the libFuzzer logs in /work/fuzzlogs.
cd /work/fuzzlogs
echo "| target | wall time | executions | exec/s | corpus (files) | coverage (cov / ft) | peak RSS | findings |"
echo "|---|---|---|---|---|---|---|---|"
for t in block block_trailer footer properties index table bloom wal batch version_edit manifest current; do
  log=$t.log
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' $log | grep -o '[0-9]*$')
  eps=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' $log | grep -o '[0-9]*$')
  rss=$(grep -o 'stat::peak_rss_mb: *[0-9]*' $log | grep -o '[0-9]*$')
  wall=$(grep -o 'wall_seconds=[0-9]*' $log | cut -d= -f2)
  exitc=$(grep -o 'exit=[0-9]*' $log | cut -d= -f2)
  cov=$(tr '\r' '\n' < $log | grep -E '^#[0-9]+' | tail -1 | grep -o 'cov: [0-9]* ft: [0-9]*' | sed 's/cov: //; s/ ft: / \/ /')
  corpus=$(ls $t/corpus | wc -l)
  arts=$(ls $t/artifacts | wc -l)
  find="none (exit $exitc)"; [ "$arts" != 0 ] && find="$arts crash input(s)"
  echo "| $t | ${wall:-running} s | ${execs:-?} | ${eps:-?} | $corpus | $cov | ${rss:-?} MB | $find |"
done
