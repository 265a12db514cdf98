#!/usr/bin/env bash
# Benchmark: the smoke matrix cold against the same with a warm package
# download cache (src/image/aptcache.rs).
#
#   cold: empty package cache, no environment images, no base images
#   warm: the package cache the cold run filled, again no images at all
#
# Both runs bootstrap their bases (debootstrap) and build every environment;
# only the .deb files (and indexes by hash) may come from the cache. The
# engine's debian:* images are never touched: the matrix is rewritten to
# bootstrap bases of its own, `rocmatrix-bench/debian:<suite>`, and
# everything the runs make carries a label of this benchmark, by which it is
# removed between the runs and at the end. The cache directory
# (ROCMATRIX_CACHE) is a scratch one too.
#
# Arguments go to both `rocmatrix run`s, e.g. `--only suite=sid`.
# Needs root (debootstrap), the Docker engine and the Debian mirror.
# Prints both wall times and warm/cold; the target is <= 0.6.
set -euo pipefail
cd "$(dirname "$0")/.."
nice -n 15 cargo build --release --quiet
bin=$PWD/target/release/rocmatrix
. benches/lib/smoke-bench.sh
smoke_bench_setup smoke-cache rocmatrix-bench/debian

export ROCMATRIX_CACHE="$tmp/cache"
now() { date +%s.%N; }
run() { # name
  local rc=0
  "$bin" --label "$label" run "$tmp/smoke.yaml" --out "$tmp/$1" --progress plain "${@:2}" \
    > "$tmp/$1.log" 2>&1 || rc=$?
  # 0: passed or expected failures only; 1: test failures (e.g. no GPU is
  # fine, a failed build is not: it leaves cells not run).
  if [ "$rc" -gt 1 ] || grep -q "could not be made" "$tmp/$1.log"; then
    echo "smoke_cache: the $1 run failed (exit $rc):" >&2
    tail -n 30 "$tmp/$1.log" >&2
    exit 1
  fi
}

t0=$(now); run cold "$@"; t1=$(now)
cold_files=$(find "$ROCMATRIX_CACHE/downloads" -type f | wc -l)
cold_bytes=$(du -sb "$ROCMATRIX_CACHE/downloads" | cut -f1)
remove_images
t2=$(now); run warm "$@"; t3=$(now)

summary() { grep -h '^package cache: ' "$tmp/$1.log" || echo "package cache: (no line)"; }
python3 - "$t0" "$t1" "$t2" "$t3" "$cold_files" "$cold_bytes" "$(summary cold)" "$(summary warm)" <<'PY'
import sys
t0, t1, t2, t3 = map(float, sys.argv[1:5])
files, size = int(sys.argv[5]), int(sys.argv[6])
cold, warm = t1 - t0, t3 - t2
print(f"cold (empty package cache, no images): {cold:7.1f} s   {sys.argv[7]}")
print(f"warm (package cache, no images)      : {warm:7.1f} s   {sys.argv[8]}")
print(f"package cache after the cold run     : {files} files, {size / 1e6:.0f} MB")
print(f"warm / cold: {warm / cold:.2f} (target <= 0.6)")
PY
