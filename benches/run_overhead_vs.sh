#!/usr/bin/env bash
# Benchmark: the per-cell overhead of two rocmatrix builds against each
# other, in one sitting: `benches/run_overhead_vs.sh OLD_BIN NEW_BIN`.
#
# Each round runs 20 trivial cells (`true`, --jobs 1) through a loop of
# `docker run --rm` and through both builds, the two builds in alternating
# order (a round's first run may pay for what the engine still tidies after
# the loop). Docker's own create and start vary by ±15% from run to run on a
# shared 2-core machine, so the comparison is over many rounds (ROUNDS,
# default 10): the sum of each build's wall times and the median of its
# ratio to the loop of its round. Then, from the runs' journals, the medians
# of each part of a cell that rocmatrix controls — container made and
# started until the first step begins, the step, the step's end until the
# cell's end (recording and judging it), one cell's end until the next
# starts — so a change in rocmatrix's own share shows however noisy the
# engine is. Needs the engine and debian:bookworm (as benches/run_overhead.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# = 2 ] || { echo "usage: $0 OLD_BIN NEW_BIN" >&2; exit 2; }
old=$(realpath "$1")
new=$(realpath "$2")
rounds=${ROUNDS:-10}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/trivial.yaml" <<YAML
name: trivial
matrix:
  n: [$(seq -s, 1 20)]
environment:
  base: debian:bookworm
steps:
  - name: true
    run: "true"
YAML
"$new" run "$tmp/trivial.yaml" --only n=1 --out "$tmp/warm" --progress quiet >/dev/null
image=$(python3 -c 'import json,sys,glob; r=json.load(open(glob.glob(sys.argv[1]+"/runs/*/run.json")[0])); print(next(iter(r["images"].values()))["tag"])' "$tmp/warm")

now() { date +%s.%N; }
for r in $(seq "$rounds"); do
  t0=$(now); for _ in $(seq 20); do docker run --rm "$image" true; done; t1=$(now)
  line="$r loop $(python3 -c "print($t1 - $t0)")"
  order="old new"; [ $((r % 2)) = 0 ] && order="new old"
  for which in $order; do
    bin=$old; [ "$which" = new ] && bin=$new
    s=$(now)
    "$bin" run "$tmp/trivial.yaml" --jobs 1 --out "$tmp/$which-$r" --progress quiet >/dev/null
    e=$(now)
    line="$line $which $(python3 -c "print($e - $s)")"
  done
  echo "$line" | tee -a "$tmp/times" | awk '{ printf "round %s: loop %.2f s, %s %.2f s, %s %.2f s\n", $1, $3, $4, $5, $6, $7 }'
done

python3 - "$tmp" <<'PY'
import glob, json, statistics, sys
from datetime import datetime
tmp = sys.argv[1]
walls = {"old": [], "new": []}
ratios = {"old": [], "new": []}
for line in open(f"{tmp}/times"):
    w = line.split()
    loop = float(w[2])
    for which, t in ((w[3], float(w[4])), (w[5], float(w[6]))):
        walls[which].append(t)
        ratios[which].append(t / loop)
for which in ("old", "new"):
    print(f"{which}: sum {sum(walls[which]):7.2f} s over {len(walls[which])} rounds, "
          f"median ratio to the docker loop {statistics.median(ratios[which]):.3f}")
print(f"new / old, summed wall time: {sum(walls['new']) / sum(walls['old']):.3f}")

def at(e):
    return datetime.fromisoformat(e["time"].replace("Z", "+00:00")).timestamp()

parts = ("cell_started->step_started", "step_started->step_finished",
         "step_finished->cell_finished", "cell_finished->cell_started")
for which in ("old", "new"):
    seen = {p: [] for p in parts}
    for journal in glob.glob(f"{tmp}/{which}-*/runs/*/journal.jsonl"):
        events = [json.loads(l) for l in open(journal)]
        for a, b in zip(events, events[1:]):
            key = f"{a['event']}->{b['event']}"
            if key in seen:
                seen[key].append((at(b) - at(a)) * 1000)
    print(f"{which}: " + ", ".join(
        f"{p} {statistics.median(v):.1f} ms" for p, v in seen.items() if v))
PY
