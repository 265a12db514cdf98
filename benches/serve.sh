#!/usr/bin/env bash
# `rocmatrix serve` at fleet scale (issue 53), on this machine, over the
# bench history of benches/history.sh (part 2: 100 recorded runs of 100,000
# tests, `h100.sqlite`, their run stores under `many/runs/`; made here with
# that script when it is not there yet):
#
#  1. each page and its JSON fetched with curl: the first request (cold:
#     worked out from the history) and the median of N more (default 20;
#     pages are kept until a run is recorded, so these are answered from
#     what the first one worked out);
#  2. a fresh server under 8 concurrent clients, each fetching every page R
#     times (default 5): the server's peak resident memory (VmHWM).
#
# Usage: benches/serve.sh [N] [R]   (ROCMATRIX_BIN=path times another build;
#                                    ROCMATRIX_BENCH_DIR=where the history is)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-20}
rounds=${2:-5}
bin=${ROCMATRIX_BIN:-target/release/rocmatrix}
[ -x "$bin" ] || cargo build --release
bin=$(realpath "$bin")
work=${ROCMATRIX_BENCH_DIR:-/tmp/rocmatrix-history-bench}
if [ ! -f "$work/h100.sqlite" ]; then
  echo "== the bench history (benches/history.sh, one round, part 1 skipped)" >&2
  HISTORY_BENCH_SKIP_1=1 HISTORY_BENCH_REPORT_ROUNDS=1 ROCMATRIX_BIN="$bin" \
    ROCMATRIX_BENCH_DIR="$work" benches/history.sh 1 >&2
fi
cd "$work"
run=$(ls -d big/runs/* | head -1)
test=$(python3 -c "
import json; r=json.load(open('$run/report/results.json'))
t=[t for c in r['cells'] for t in c['tests'] if t['status']=='failed'][0]; print(t['classname']+'.'+t['name'])")
matrix=history-bench
pages=("/" "/matrix?name=$matrix" "/test?name=$test" "/flaky" "/runs" "/hosts"
       "/api" "/api/matrix?name=$matrix" "/api/test?name=$test" "/api/flaky" "/api/runs" "/api/hosts")

pid=""
start() {
  "$bin" serve --out many --history h100.sqlite --listen 127.0.0.1:0 >serve.out 2>serve.err &
  pid=$!
  for _ in $(seq 100); do
    addr=$(sed -n 's|^serving http://\([^/]*\)/.*|\1|p' serve.out)
    [ -n "$addr" ] && break
    sleep 0.1
  done
  [ -n "$addr" ] || { cat serve.err >&2; exit 1; }
  base="http://$addr"
}
stop() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true; pid=""; }
trap stop EXIT
ms() { curl -sS -o /dev/null -w '%{time_total}\n' "$1" | awk '{printf "%.1f\n", $1 * 1000}'; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

echo "== 1. each page: the first request, and the median of $n more" >&2
start
printf '%-40s %10s %12s\n' page "first ms" "median ms"
for p in "${pages[@]}"; do
  first=$(ms "$base$p")
  med=$(for _ in $(seq "$n"); do ms "$base$p"; done | median)
  printf '%-40s %10s %12s\n' "$p" "$first" "$med"
done
stop

echo "== 2. a fresh server, 8 clients at once, every page $rounds times each" >&2
start
t0=$(date +%s.%N)
clients=()
for _ in $(seq 8); do
  ( for _ in $(seq "$rounds"); do for p in "${pages[@]}"; do
      curl -sS -o /dev/null "$base$p"; done; done ) &
  clients+=($!)
done
wait "${clients[@]}"
t1=$(date +%s.%N)
hwm=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")
printf 'peak RSS %.1f MiB under 8 clients (%d requests in %.1f s)\n' \
  "$(echo "$hwm / 1024" | bc -l)" "$((8 * rounds * ${#pages[@]}))" "$(echo "$t1 - $t0" | bc -l)"
