#!/usr/bin/env bash
# The solve_real study on local llama.cpp servers, one queue per server (two queues
# on one server evict each other's prompt cache), resumable: started again, a queue goes on
# from what its results file holds.
#
#   benchmarks/solve_real_study.sh PORT STRATEGIES NAME [solve_real.py flags...]
# e.g. (two servers of one thread each):
#   benchmarks/solve_real_study.sh 8011 react,retry a &
#   benchmarks/solve_real_study.sh 8012 reflexion-memory b &
#   python benchmarks/solve_real.py --table study/solve-real-a.jsonl study/solve-real-b.jsonl
# Results: $STUDY_DIR/solve-real-NAME.jsonl (one line per strategy and bug) and .log; the
# projects, their memories and each solve's log: $WORK/runs/solve-real-NAME.
set -u
port=$1; strategies=$2; name=$3; shift 3
root=${STUDY_DIR:-study}
work=${WORK:-$root/solve-real-work}
here=$(cd "$(dirname "$0")" && pwd)
export ORT_DISABLE_TELEMETRY=1
mkdir -p "$root"
out=$root/solve-real-$name.jsonl
echo "=== $(date -u +%H:%M:%S) solve_real $strategies on $port" >> "$root/solve-real-$name.log"
python "$here/solve_real.py" --base-url "http://127.0.0.1:$port/v1" --strategies "$strategies" \
  --work "$work" --out "$out" --resume "$@" >> "$root/solve-real-$name.log" 2>&1
echo "=== $(date -u +%H:%M:%S) rc=$?" >> "$root/solve-real-$name.log"
