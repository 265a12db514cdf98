#!/usr/bin/env bash
# Benchmark: per-cell overhead of `rocmatrix run` against the docker CLI.
#
# 20 trivial cells (`true`) through `rocmatrix run` (--jobs 1 and --jobs 2)
# against a shell loop of `docker run --rm IMAGE true` on the same image, all
# in one run. The image is built (or reused) before anything is timed.
# Prints wall times, per-cell times and the ratios (ROUNDS rounds, default 3,
# the median's in full); a one-cell run splits
# rocmatrix's time into a fixed cost per run and a cost per cell. Then one
# more 20-cell run goes through a counting proxy (benches/engine_calls.py,
# not timed) and the engine calls are printed per cell and per run.
# Needs the Docker engine and the base image debian:bookworm (bootstrapped by
# `scripts/smoke`). ROCMATRIX_BIN=path times that binary instead of building
# this tree's (to compare two builds in one session).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${ROCMATRIX_BIN:-}" ]; then
  bin=$ROCMATRIX_BIN
else
  cargo build --release --quiet
  bin=target/release/rocmatrix
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cells=20
values=$(seq -s, 1 "$cells")
cat > "$tmp/trivial.yaml" <<YAML
name: trivial
matrix:
  n: [$values]
environment:
  base: debian:bookworm
steps:
  - name: true
    run: "true"
YAML

now() { date +%s.%N; }
# Warm-up: make the environment image and find its tag.
"$bin" run "$tmp/trivial.yaml" --only n=1 --out "$tmp/warm" --progress quiet >/dev/null
image=$(python3 -c 'import json,sys,glob; r=json.load(open(glob.glob(sys.argv[1]+"/runs/*/run.json")[0])); print(next(iter(r["images"].values()))["tag"])' "$tmp/warm")

# ROUNDS rounds (default 3), each timing the docker loop and the rocmatrix
# runs back to back, so that a load that comes and goes on a shared machine
# hits both sides alike; the ratio reported is the median round's.
rounds=${ROUNDS:-3}
for r in $(seq "$rounds"); do
  t0=$(now); for _ in $(seq "$cells"); do docker run --rm "$image" true; done; t1=$(now)
  "$bin" run "$tmp/trivial.yaml" --jobs 1 --out "$tmp/j1-$r" --progress quiet >/dev/null; t2=$(now)
  "$bin" run "$tmp/trivial.yaml" --jobs 2 --out "$tmp/j2-$r" --progress quiet >/dev/null; t3=$(now)
  "$bin" run "$tmp/trivial.yaml" --jobs 1 --only n=1 --out "$tmp/one-$r" --progress quiet >/dev/null; t4=$(now)
  echo "$t0 $t1 $t2 $t3 $t4" >> "$tmp/times"
done

python3 - "$cells" "$tmp/times" <<'PY'
import statistics, sys
n = int(sys.argv[1])
rounds = []
for line in open(sys.argv[2]):
    t0, t1, t2, t3, t4 = map(float, line.split())
    rounds.append((t1 - t0, t2 - t1, t3 - t2, t4 - t3))
for i, (loop, j1, j2, one) in enumerate(rounds, 1):
    print(f"round {i}: loop {loop:6.2f} s  --jobs 1 {j1:6.2f} s  --jobs 2 {j2:6.2f} s  "
          f"1 cell {one:5.2f} s  ratio {j1 / loop:.2f}")
# The median round by ratio, reported in full.
loop, j1, j2, one = sorted(rounds, key=lambda r: r[1] / r[0])[len(rounds) // 2]
per_cell = (j1 - one) / (n - 1)
print(f"median round of {len(rounds)}:")
print(f"docker run --rm loop : {loop:6.2f} s  ({loop / n * 1000:6.0f} ms/cell)")
print(f"rocmatrix --jobs 1   : {j1:6.2f} s  ({j1 / n * 1000:6.0f} ms/cell)")
print(f"rocmatrix --jobs 2   : {j2:6.2f} s  ({j2 / n * 1000:6.0f} ms/cell)")
print(f"rocmatrix 1 cell     : {one:6.2f} s  (fixed cost per run ~{(one - per_cell) * 1000:.0f} ms, "
      f"~{per_cell * 1000:.0f} ms per further cell)")
print(f"per-cell ratio rocmatrix(--jobs 1) / docker loop: {j1 / loop:.2f}")
print(f"--jobs 2 speed-up over --jobs 1: {j1 / j2:.2f}x")
PY

# Engine calls, counted through a proxy in front of the engine's socket.
sock=${DOCKER_HOST:-unix:///var/run/docker.sock}
sock=${sock#unix://}
if [ -S "$sock" ]; then
  python3 benches/engine_calls.py "$tmp/proxy.sock" "$sock" "$tmp/calls.log" -- \
    "$bin" run "$tmp/trivial.yaml" --jobs 1 --out "$tmp/counted" --progress quiet >/dev/null
  python3 - "$cells" "$tmp/calls.log" <<'PY'
import collections, re, sys
n = int(sys.argv[1])
counts = collections.Counter()
for line in open(sys.argv[2]):
    method, path = line.split()
    path = re.sub(r"^/v[0-9.]+", "", path.split("?")[0])
    # Ids and names become placeholders so that calls group by kind.
    if not re.fullmatch(r"/(containers|images)/(create|json)", path):
        path = re.sub(r"^/(containers|exec)/[^/]+", r"/\1/{id}", path)
        path = re.sub(r"^/images/.+?(/json|/push|/tag|/get)?$", r"/images/{name}\1", path)
    counts[f"{method} {path}"] += 1
total = sum(counts.values())
print(f"engine calls, {n} cells --jobs 1: {total} ({total / n:.1f} per cell)")
for call, c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
    print(f"  {c:4d}  {call}")
PY
else
  echo "engine calls: not counted ($sock is not a Unix socket)"
fi
