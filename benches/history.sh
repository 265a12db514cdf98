#!/usr/bin/env bash
# The history's speed and size (issue 35), on this machine:
#
#  1. recording a 1,000,000-test run (20 cells of 50,000 googletest cases,
#     2% failing, as benches/ingest.rs makes them) against `report` of the
#     same run, median of R rounds each, interleaved; and how much the
#     SQLite file grows;
#  2. with 100 recorded runs of 100,000 tests: `history show TEST` and
#     `history flaky`, median of R rounds;
#  3. over those runs, `report` of a 100,000-test run with its history
#     column against `report --history off`, median of R rounds each.
#
# The run stores are real: a 20-cell matrix runs once on debian:bookworm
# (it must be in the engine), then each cell's JUnit files are replaced by
# generated ones and the report is rebuilt. Usage:
#   benches/history.sh [ROUNDS]      (ROCMATRIX_BIN=path times another build;
#                                     HISTORY_BENCH_SKIP_1=1 skips part 1)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
bin=${ROCMATRIX_BIN:-target/release/rocmatrix}
[ -x "$bin" ] || cargo build --release
bin=$(realpath "$bin")
work=${ROCMATRIX_BENCH_DIR:-/tmp/rocmatrix-history-bench}
rm -rf "$work" && mkdir -p "$work"
cd "$work"

cat > m.yaml <<'EOF'
name: history-bench
matrix:
  n: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19]
environment:
  base: debian:bookworm
steps:
  - name: tests
    junit: [/work/junit/*.xml]
    run: mkdir -p /work/junit && echo '<testsuite name="s" tests="1"><testcase classname="c" name="t"/></testsuite>' > /work/junit/r.xml
EOF
echo "== a real 20-cell run" >&2
"$bin" run m.yaml --out big --progress plain --history off >/dev/null || true
run=$(ls -d big/runs/* | head -1)

# Replaces each cell's JUnit with `per_cell` generated cases in files of
# 2,000 (Kernel<f>Suite<s>.Case<t>, 2% failing), and lists them in cell.json.
generate() {
  python3 - "$1" "$2" <<'PY'
import json, os, sys, glob
run, per_cell = sys.argv[1], int(sys.argv[2])
seed = 0x2545F4914F6CDD1D
for cdir in sorted(glob.glob(os.path.join(run, "cells", "*"))):
    rec = json.load(open(os.path.join(cdir, "cell.json")))
    jdir = os.path.join(cdir, "junit", "bench")
    os.makedirs(jdir, exist_ok=True)
    files = []
    for f in range(per_cell // 2000):
        out = ['<?xml version="1.0" encoding="UTF-8"?>\n<testsuites name="AllTests">\n']
        for suite in range(20):
            out.append(f'  <testsuite name="Kernel{f:03}Suite{suite:02}" tests="100">\n')
            for t in range(100):
                seed = (seed * 6364136223846793005 + 1442695040888963407) % (1 << 64)
                name = f'name="Case{t:03}" status="run" time="0.001" classname="Kernel{f:03}Suite{suite:02}"'
                if (seed >> 33) % 50 == 0:
                    out.append(f'    <testcase {name}><failure message="kernel.cpp:{t}: Expected 1, got 2"/></testcase>\n')
                else:
                    out.append(f'    <testcase {name} />\n')
            out.append('  </testsuite>\n')
        out.append('</testsuites>\n')
        rel = os.path.join("junit", "bench", f"gtest-{f:03}.xml")
        open(os.path.join(cdir, rel), "w").write("".join(out))
        files.append(rel)
    rec["junit"] = files
    json.dump(rec, open(os.path.join(cdir, "cell.json"), "w"), indent=1)
PY
}

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
secs() { local t0 t1; t0=$(date +%s.%N); "$@" >/dev/null 2>&1 || true; t1=$(date +%s.%N); echo "$t1 - $t0" | bc; }

if [ -z "${HISTORY_BENCH_SKIP_1:-}" ]; then
echo "== 1. a 1,000,000-test run: report against recording it" >&2
generate "$run" 50000
"$bin" report "$run" --history off >/dev/null || true
report=() record=()
for r in $(seq "$rounds"); do
  report+=("$(secs "$bin" report "$run" --history off)")
  rm -f h1.sqlite*
  record+=("$(secs "$bin" history import "$run" --history h1.sqlite)")
done
python3 -c "import sqlite3; c=sqlite3.connect('h1.sqlite'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.close()"
rep=$(printf '%s\n' "${report[@]}" | median)
rec=$(printf '%s\n' "${record[@]}" | median)
size=$(stat -c %s h1.sqlite)
printf 'report        %6.2f s (median of %d)\nrecord        %6.2f s (median of %d)  ratio %.2f\nhistory.sqlite %5.1f MB for one 1,000,000-test run\n' \
  "$rep" "$rounds" "$rec" "$rounds" "$(echo "$rec / $rep" | bc -l)" "$(echo "$size / 1000000" | bc -l)"
fi

echo "== 2. 100 recorded runs of 100,000 tests" >&2
generate "$run" 5000
"$bin" report "$run" --history off >/dev/null || true
python3 - "$run" <<'PY'
import json, os, shutil, sys
run = sys.argv[1]
root = os.path.join("many", "runs")
os.makedirs(root, exist_ok=True)
info = json.load(open(os.path.join(run, "run.json")))
for k in range(100):
    rid = f"20260101-{k:06d}-beef"
    d = os.path.join(root, rid)
    os.makedirs(os.path.join(d, "report"))
    shutil.copy(os.path.join(run, "plan.json"), d)
    shutil.copytree(os.path.join(run, "cells"), os.path.join(d, "cells"),
                    ignore=shutil.ignore_patterns("junit", "logs"))
    shutil.copy(os.path.join(run, "report", "results.json"), os.path.join(d, "report"))
    i = dict(info, run_id=rid, started=f"2026-01-01T00:{k // 60:02d}:{k % 60:02d}.000Z")
    json.dump(i, open(os.path.join(d, "run.json"), "w"))
PY
"$bin" history import many/runs/* --history h100.sqlite >/dev/null
python3 -c "import sqlite3; c=sqlite3.connect('h100.sqlite'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.close()"
test=$("$bin" history flaky --history h100.sqlite --json >/dev/null; python3 -c "
import json; r=json.load(open('$run/report/results.json'))
t=[t for c in r['cells'] for t in c['tests'] if t['status']=='failed'][0]; print(t['classname']+'.'+t['name'])")
show=() flaky=()
for r in $(seq "$rounds"); do
  show+=("$(secs "$bin" history show "$test" --history h100.sqlite)")
  flaky+=("$(secs "$bin" history flaky --history h100.sqlite)")
done
printf 'history show  %6.3f s (median of %d; %s)\nhistory flaky %6.3f s\nhistory.sqlite %5.1f MB for 100 runs of 100,000 tests\n' \
  "$(printf '%s\n' "${show[@]}" | median)" "$rounds" "$test" \
  "$(printf '%s\n' "${flaky[@]}" | median)" "$(echo "$(stat -c %s h100.sqlite) / 1000000" | bc -l)"

echo "== 3. the report's history column, over those 100 runs" >&2
# The run itself is recorded once first; each timed report then builds its
# record (found already recorded), reads the window and writes the column.
# A report takes ~0.15 s here, so this part takes ten times ROUNDS rounds
# (HISTORY_BENCH_REPORT_ROUNDS), alternating. Wall time is what a user
# waits; CPU time (perf's task-clock, every thread) also counts the
# history's thread, which runs beside the pages' writing.
cp h100.sqlite h100-report.sqlite
"$bin" report "$run" --history h100-report.sqlite >/dev/null || true
n3=${HISTORY_BENCH_REPORT_ROUNDS:-$((rounds * 10))}
# (report exits 1 on failing tests, as the generated run has.)
cpu_ms() { { perf stat -x, -e task-clock "$@" 2>&1 >/dev/null || true; } | awk -F, '/task-clock/ {print $1}'; }
plain=() with=() plain_cpu=() with_cpu=()
for r in $(seq "$n3"); do
  plain+=("$(secs "$bin" report "$run" --history off)")
  with+=("$(secs "$bin" report "$run" --history h100-report.sqlite)")
  if command -v perf >/dev/null; then
    plain_cpu+=("$(cpu_ms "$bin" report "$run" --history off)")
    with_cpu+=("$(cpu_ms "$bin" report "$run" --history h100-report.sqlite)")
  fi
done
p=$(printf '%s\n' "${plain[@]}" | median)
w=$(printf '%s\n' "${with[@]}" | median)
printf 'report         %6.3f s wall (median of %d, --history off)\nreport+history %6.3f s wall (%+.1f%%)\n' \
  "$p" "$n3" "$w" "$(echo "($w / $p - 1) * 100" | bc -l)"
if [ "${#plain_cpu[@]}" -gt 0 ]; then
  pc=$(printf '%s\n' "${plain_cpu[@]}" | median)
  wc=$(printf '%s\n' "${with_cpu[@]}" | median)
  printf 'report         %6.1f ms CPU (median of %d, --history off)\nreport+history %6.1f ms CPU (%+.1f%%)\n' \
    "$pc" "$n3" "$wc" "$(echo "($wc / $pc - 1) * 100" | bc -l)"
fi
