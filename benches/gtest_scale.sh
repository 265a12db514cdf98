#!/usr/bin/env bash
# The gtest adapter at scale: a generated googletest program of 30,000
# trivial tests (2,000 plain, 25,000 value-parameterised, 3,000 typed;
# benches/data/gtest_30k.py writes it), built in a Debian bookworm container
# with g++ and Debian's libgtest-dev as the suite tests build theirs. The
# build is a `build:` stage, so it runs once and its snapshot serves every
# round (and later runs of the bench on the same engine). Then, ROUNDS times,
# in one cell and container, interleaved so that the machine's drift hits
# both sides (plain and adapter twice each per round), after an untimed
# warm-up that reads the binary in once:
#
#   plain          the binary once, --gtest_output=xml, its output in the step log
#   plain-quiet    the same with its output to /dev/null
#   adapter        the same binary through the gtest adapter (one process by the
#                  step's filter, progress lines read as they stream, XML read
#                  back, JUnit written)
#   one-test       the binary running one test: what starting a process costs
#   adapter-crashy the adapter on a copy whose name ends in -crashy: 1% of its
#                  tests (300) die of SIGSEGV, each costing one new process
#
# Prints the medians, adapter / plain, and the time per crash:
# (adapter-crashy - adapter) / crashes, against one-test.
#
#   benches/gtest_scale.sh [ROUNDS]   (default 3; needs the engine; the first
#                                      round bootstraps debian:bookworm;
#                                      ROCMATRIX_BIN=path uses that binary)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
if [ -n "${ROCMATRIX_BIN:-}" ]; then
  bin=$ROCMATRIX_BIN      # a rocmatrix binary built already
else
  cargo build --release --quiet
  bin=target/release/rocmatrix
fi
work=$(mktemp -d)
keep=${ROCMATRIX_BENCH_KEEP:-}
[ -n "$keep" ] || trap 'rm -rf "$work"' EXIT
code=$(python3 benches/data/gtest_30k.py | sed 's/^/        /')
cat > "$work/m.yaml" <<YAML
name: gtest-scale
matrix:
  suite: [bookworm]
environment:
  base: debian:bookworm
  packages: [g++, libgtest-dev]
timeout: 60m
build:
  steps:
    - name: compile
      run: |
        cat > t.cc <<'CC'
$code
        CC
        g++ -O0 -o /work/t t.cc -lgtest -lgtest_main -pthread
        cp /work/t /work/t-crashy
        /work/t --gtest_list_tests | grep -c '^  '
steps:
  # Not timed: brings the binary's pages in from the snapshot's layer, which
  # the first step to run it would pay for alone.
  - name: warm-up
    run: /work/t --gtest_list_tests >/dev/null
  - name: plain
    run: /work/t --gtest_output=xml:/tmp/plain.xml
  - name: adapter
    continue_on_error: true
    gtest:
      binary: /work/t
  - name: plain-quiet
    run: /work/t --gtest_output=xml:/tmp/plain.xml >/dev/null
  - name: plain-again
    run: /work/t --gtest_output=xml:/tmp/plain.xml
  - name: adapter-again
    continue_on_error: true
    gtest:
      binary: /work/t
  - name: one-test
    run: /work/t-crashy --gtest_filter=Plain00.Case00 --gtest_output=xml:/tmp/one.xml
  - name: adapter-crashy
    continue_on_error: true
    gtest:
      binary: /work/t-crashy
YAML
for i in $(seq "$rounds"); do
  "$bin" run "$work/m.yaml" --out "$work/out" --progress plain >"$work/round$i.log" 2>&1 || true
done
python3 - "$work/out/runs" <<'PY'
import glob, json, os, re, statistics, sys
root = sys.argv[1]
rows = {k: [] for k in ["plain", "plain-quiet", "adapter", "one-test", "adapter-crashy"]}
crashes = []
for run in sorted(os.listdir(root)):
    cell_dir = os.path.join(root, run, "cells", "bookworm")
    cell = json.load(open(os.path.join(cell_dir, "cell.json")))
    steps = {s["name"]: s["duration_secs"] for s in cell["steps"]}
    if "adapter-crashy" not in steps:
        print(f"{run}: incomplete ({cell.get('status')}: {cell.get('reason')})")
        continue
    # Two of each per round, interleaved: the machine's drift hits both.
    rows["plain"] += [steps["plain"], steps["plain-again"]]
    rows["adapter"] += [steps["adapter"], steps["adapter-again"]]
    for k in ["plain-quiet", "one-test", "adapter-crashy"]:
        rows[k].append(steps[k])
    n = 0
    for j in glob.glob(os.path.join(cell_dir, "junit", "*adapter-crashy*", "*.xml")):
        n += len(re.findall(r'type="SIGSEGV"', open(j).read()))
    crashes.append(n)
med = {k: statistics.median(v) for k, v in rows.items() if v}
print(f"rounds: {len(rows['adapter-crashy'])}")
for k, v in rows.items():
    if v:
        print(f"{k:15} median {med[k]:.2f} s  ({', '.join(f'{x:.2f}' for x in v)})")
print(f"adapter / plain:       {med['adapter'] / med['plain']:.2f}x")
print(f"adapter / plain-quiet: {med['adapter'] / med['plain-quiet']:.2f}x")
c = statistics.median(crashes)
per_crash = (med['adapter-crashy'] - med['adapter']) / max(c, 1)
print(f"crashes: {c:.0f} of 30,000; per crash: {per_crash * 1000:.0f} ms "
      f"({per_crash / med['one-test']:.2f}x a process of one test, {med['one-test'] * 1000:.0f} ms)")
PY
