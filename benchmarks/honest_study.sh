#!/usr/bin/env bash
# The honest-stopping study on a local llama.cpp server, resumable: each run keeps
# its id in OUT.runid and is resumed with --resume when started again.
#
#   benchmarks/honest_study.sh PORT STRATEGIES RUN...      RUN: he-honest mbpp-honest he-self
#                                                            mbpp-self he-oracle
# e.g. (two servers of one thread each, one per queue):
#   benchmarks/honest_study.sh 8011 react,retry,reflexion he-honest mbpp-honest &
#   benchmarks/honest_study.sh 8012 reflexion-memory he-honest mbpp-honest &
# he-oracle continues from he-honest's trial 1s (--first-from, same memory) when that run of the
# same strategies exists (run it after its react arm has finished); otherwise it makes its own. reflexion-memory on a
# *-self run takes the self-tests of the react,retry,reflexion run of that name (--first-from):
# start it once that run has written them.
set -u
port=$1; strategies=$2; shift 2
root=${STUDY_DIR:-study}
mbpp=${MBPP:-../shared/datasets/mbpp-py.jsonl}
export OPENAI_BASE_URL=http://127.0.0.1:$port/v1 MULLIGAN_MODEL=${MULLIGAN_MODEL:-qwen2.5-coder-1.5b}
export OPENAI_API_KEY=${OPENAI_API_KEY:-none} ORT_DISABLE_TELEMETRY=1
tag=$(echo "$strategies" | tr ',' '-')
mkdir -p "$root"
for name in "$@"; do
  case $name in
    he-*) suite=(humaneval --sample 80 --seed 1) ;;
    mbpp-*) suite=(mbpp --data "$mbpp" --sample 40 --seed 1) ;;
    *) echo "unknown run $name" >&2; exit 2 ;;
  esac
  out=$root/$name-$tag
  extra=()
  case $name in
    *-self)
      extra=(--self-tests 3)
      shared=$root/$name-react-retry-reflexion  # the same self-tests, when that run exists
      if [ "$strategies" = reflexion-memory ] && [ -s "$shared.runid" ]; then
        extra+=(--first-from "$(cat "$shared.runid")" --memory "$shared/memory")
      fi ;;
    *-oracle)
      honest=$root/he-honest-$tag  # continue from its trial 1s when that run exists
      extra=(--stop oracle)
      if [ -s "$honest.runid" ]; then
        extra+=(--first-from "$(cat "$honest.runid")" --memory "$honest/memory")
      fi ;;
  esac
  resume=()
  [ -s "$out.runid" ] && resume=(--resume "$(cat "$out.runid")")
  echo "=== $(date -u +%H:%M:%S) $name $strategies ${resume[*]}"
  mulligan bench "${suite[@]}" --trials 3 --temperature 0.7 --timeout 600 \
    --strategies "$strategies" --out "$out" "${extra[@]}" "${resume[@]}" \
    > "$out.stdout" 2> "$out.stderr.now" &
  pid=$!
  while kill -0 $pid 2>/dev/null && [ ! -s "$out.runid" ]; do
    id=$(grep -o "run id: [0-9a-f]*" "$out.stderr.now" | head -1 | cut -d' ' -f3)
    [ -n "$id" ] && echo "$id" > "$out.runid"
    sleep 5
  done
  wait $pid
  echo "=== $(date -u +%H:%M:%S) $name rc=$?"
  cat "$out.stderr.now" >> "$out.stderr"
done
