#!/usr/bin/env bash
# Benchmark: per-cell overhead of `rocmatrix run` against the docker CLI.
#
# 20 trivial cells (`true`) through `rocmatrix run` (--jobs 1 and --jobs 2)
# against a shell loop of `docker run --rm IMAGE true` on the same image, all
# in one run. The image is built (or reused) before anything is timed.
# Prints wall times, per-cell times and the ratios. Needs the Docker engine
# and the base image debian:bookworm (bootstrapped by `scripts/smoke`).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
bin=target/release/rocmatrix
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

t0=$(now); for _ in $(seq "$cells"); do docker run --rm "$image" true; done; t1=$(now)
"$bin" run "$tmp/trivial.yaml" --jobs 1 --out "$tmp/j1" --progress quiet >/dev/null; t2=$(now)
"$bin" run "$tmp/trivial.yaml" --jobs 2 --out "$tmp/j2" --progress quiet >/dev/null; t3=$(now)

python3 - "$cells" "$t0" "$t1" "$t2" "$t3" <<'PY'
import sys
n = int(sys.argv[1]); t0, t1, t2, t3 = map(float, sys.argv[2:])
loop, j1, j2 = t1 - t0, t2 - t1, t3 - t2
print(f"docker run --rm loop : {loop:6.2f} s  ({loop / n * 1000:6.0f} ms/cell)")
print(f"rocmatrix --jobs 1   : {j1:6.2f} s  ({j1 / n * 1000:6.0f} ms/cell)")
print(f"rocmatrix --jobs 2   : {j2:6.2f} s  ({j2 / n * 1000:6.0f} ms/cell)")
print(f"per-cell ratio rocmatrix(--jobs 1) / docker loop: {j1 / loop:.2f}")
print(f"--jobs 2 speed-up over --jobs 1: {j1 / j2:.2f}x")
PY
