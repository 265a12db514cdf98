#!/usr/bin/env bash
# The gtest adapter's overhead: MIOpen's 80 CPU_* tests (Debian sid's
# libmiopen1-tests) run once as a plain step (the binary, once, with its XML
# report) and once through the adapter (listing, batch, XML read back, JUnit
# written), in the same cell and container, ROUNDS times. Prints the step
# times and the ratio adapter / plain (the aim: under 1.2).
#
#   benches/gtest_overhead.sh [ROUNDS]     (default 3; needs the engine; the
#                                           first round builds the 5.4 GB image)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
cargo build --release --quiet
bin=target/release/rocmatrix
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/m.yaml" <<'YAML'
name: gtest-overhead
matrix:
  suite: [sid]
environment:
  base: debian:sid
  packages: [libmiopen1-tests]
timeout: 30m
steps:
  - name: plain
    run: /usr/libexec/rocm/libmiopen1-tests/miopen_gtest --gtest_filter='CPU_*' --gtest_output=xml:/tmp/plain.xml >/dev/null || true
  - name: adapter
    continue_on_error: true
    gtest:
      binary: /usr/libexec/rocm/libmiopen1-tests/miopen_gtest
      filter: "CPU_*"
  - name: plain-again
    run: /usr/libexec/rocm/libmiopen1-tests/miopen_gtest --gtest_filter='CPU_*' --gtest_output=xml:/tmp/plain.xml >/dev/null || true
YAML
for i in $(seq "$rounds"); do
  "$bin" run "$work/m.yaml" --out "$work/out" --progress plain >/dev/null 2>&1 || true
done
python3 - "$work/out/runs" <<'PY'
import json, os, statistics, sys
root = sys.argv[1]
plain, adapter = [], []
for run in sorted(os.listdir(root)):
    cell = json.load(open(os.path.join(root, run, "cells", "sid", "cell.json")))
    steps = {s["name"]: s["duration_secs"] for s in cell["steps"]}
    plain.append((steps["plain"] + steps["plain-again"]) / 2)
    adapter.append(steps["adapter"])
p, a = statistics.median(plain), statistics.median(adapter)
print(f"rounds: {len(plain)}")
print(f"plain binary, once:   median {p:.2f} s  ({', '.join(f'{x:.2f}' for x in plain)})")
print(f"through the adapter:  median {a:.2f} s  ({', '.join(f'{x:.2f}' for x in adapter)})")
print(f"ratio adapter/plain:  {a / p:.2f}x")
PY
