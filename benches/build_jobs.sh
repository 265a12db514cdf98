#!/usr/bin/env bash
# Benchmark: the smoke matrix cold, its environments prepared side by side
# (the default --build-jobs) against one after another (--build-jobs 1).
#
#   cold: no base images, no environment images, an empty package cache
#         (src/image/aptcache.rs) — for both runs, each its own: the first
#         run from a fresh clone, which is what a new user waits on.
#
# Both runs bootstrap their three bases (debootstrap of bookworm, trixie and
# sid) and build the three environment images, then run the nine cells. The
# engine's debian:* images are never touched: the matrix is rewritten to
# bootstrap bases of its own, `rocmatrix-bench-jobs/debian:<suite>`, and
# everything the runs make carries a label of this benchmark, by which it is
# removed before the second run and at the end. The side-by-side run goes
# first: whatever the mirror warms up for the second run favours the
# sequential one.
#
# Arguments go to both `rocmatrix run`s. ROCMATRIX_BIN picks a binary
# (default: a release build). Needs root (debootstrap), the Docker engine and
# the Debian mirror. Prints both wall times, each environment's image time
# and side-by-side / sequential; the target is <= 0.65.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${ROCMATRIX_BIN:-}" ]; then
  nice -n 15 cargo build --release --quiet
fi
bin=${ROCMATRIX_BIN:-$PWD/target/release/rocmatrix}
. benches/lib/smoke-bench.sh
smoke_bench_setup build-jobs rocmatrix-bench-jobs/debian

now() { date +%s.%N; }
run() { # name, rocmatrix arguments
  local rc=0
  ROCMATRIX_CACHE="$tmp/cache-$1" \
    "$bin" --label "$label" run "$tmp/smoke.yaml" --out "$tmp/$1" --progress plain "${@:2}" \
    > "$tmp/$1.log" 2>&1 || rc=$?
  # 0: passed or expected failures only; 1: test failures (e.g. no GPU is
  # fine, a failed image is not: it leaves cells not run).
  if [ "$rc" -gt 1 ] || grep -q "could not be made" "$tmp/$1.log"; then
    echo "build_jobs: the $1 run failed (exit $rc):" >&2
    tail -n 30 "$tmp/$1.log" >&2
    exit 1
  fi
}

t0=$(now); run side-by-side "$@"; t1=$(now)
remove_images
t2=$(now); run sequential --build-jobs 1 "$@"; t3=$(now)

python3 - "$t0" "$t1" "$t2" "$t3" "$tmp" <<'PY'
import glob, json, os, sys
t0, t1, t2, t3 = map(float, sys.argv[1:5])
tmp = sys.argv[5]
def images(name):
    journal = glob.glob(os.path.join(tmp, name, "runs", "*", "journal.jsonl"))[0]
    out = []
    for line in open(journal):
        e = json.loads(line)
        if e.get("event") == "image_finished":
            out.append(f"{e['environment']} {e['secs']:.0f} s")
    return ", ".join(out)
par, seq = t1 - t0, t3 - t2
print(f"side by side (default --build-jobs): {par:7.1f} s   images: {images('side-by-side')}")
print(f"sequential   (--build-jobs 1)      : {seq:7.1f} s   images: {images('sequential')}")
print(f"side by side / sequential: {par / seq:.2f} (target <= 0.65)")
PY
