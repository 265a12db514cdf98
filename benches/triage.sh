#!/usr/bin/env bash
# Benchmark: `rocmatrix run --baseline OLD --triage` on a project whose
# history moved 63 commits between two nightly runs, and a second triage
# of the same run.
#
# A shell project made here: the baseline runs at commit 1, then commits
# 2..64 land on main — commit 41 breaks `sum` (a new signature), commit 60
# fixes `product` (a gone one), commit 23 does not build and commits 50-55
# fail with an unrelated error — and the run at commit 64 triages itself.
# Builds are cold (a nonce in the build step); the environment image is
# made before anything is timed.
#
# Prints, per signature, the probes against the bound ⌈log2 N⌉ + 3 (N = 64
# commits, both ends included), the wall time of the run with its triage
# and of the run alone, and the second triage's probes (0) and wall time.
# Needs the engine and debian:bookworm. ROCMATRIX_BIN picks the binary
# (default: a release build).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${ROCMATRIX_BIN:-}" ]; then
    cargo build --release --quiet
    ROCMATRIX_BIN=target/release/rocmatrix
fi
bin=$(realpath "$ROCMATRIX_BIN")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
nonce=$(date +%s%N)
label="rocmatrix.bench=triage-$nonce"
now() { date +%s.%N; }
secs() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$2"; }

repo=$tmp/proj
mkdir -p "$repo"
git -C "$repo" init -q -b main
commit() {
    local k=$1
    if [ "$k" = 23 ]; then
        printf '#!/bin/sh\necho "build.sh: syntax error" >&2\nexit 2\n' > "$repo/build.sh"
    else
        printf '#!/bin/sh\nset -e\nmkdir -p /work/out\ncp /src/proj/test.sh /work/out/\n' > "$repo/build.sh"
    fi
    local add="4 + 6" mul="2 \\* 6"
    [ "$k" -ge 41 ] && add="4 + 7"
    [ "$k" -ge 60 ] && mul="2 \\* 5"
    {
        echo '#!/bin/sh'
        if [ "$k" -ge 50 ] && [ "$k" -le 55 ]; then
            echo "echo 'error: fixture database is locked' >&2; exit 1"
        fi
        echo "if [ \"\$1\" = sum ]; then got=\$(expr $add); if [ \"\$got\" != 10 ]; then echo \"sum: FAILED: expected 10, got \$got\"; exit 1; fi; fi"
        echo "if [ \"\$1\" = product ]; then got=\$(expr $mul); if [ \"\$got\" != 10 ]; then echo \"product: FAILED: expected 10, got \$got\"; exit 1; fi; fi"
    } > "$repo/test.sh"
    echo "$k" > "$repo/VERSION"
    git -C "$repo" add .
    git -C "$repo" -c user.name=b -c user.email=b@example.org commit -qm "commit $k"
}
cat > "$tmp/m.yaml" <<EOF
name: bench-triage
matrix:
  part: [sum, product]
environment:
  base: debian:bookworm
  env: {BENCH: "$nonce"}
retries: 0
sources:
  - name: proj
    url: $repo
    ref: main
build:
  steps:
    - name: build
      run: |
        # triage $nonce
        sh /src/proj/build.sh
steps:
  - name: test
    run: sh /work/out/test.sh {{ matrix.part }}
EOF
commit 1
out=$tmp/out
run() { nice -n 19 "$bin" --label "$label" "$@"; }
run run "$tmp/m.yaml" --out "$out" --progress quiet > "$tmp/base.out" 2>&1 || true
base=$(sed -n 's/^run store: //p' "$tmp/base.out" | tail -n 1)
for k in $(seq 2 64); do commit "$k"; done
t0=$(now)
run run "$tmp/m.yaml" --out "$out" --progress quiet --baseline "$base" --triage \
    > "$tmp/triage.out" 2> "$tmp/triage.err" || true
t1=$(now)
head=$(sed -n 's/^run store: //p' "$tmp/triage.out" | tail -n 1)
t2=$(now)
run triage "$head" --baseline "$base" --out "$out" --json > "$tmp/again.json" 2>/dev/null
t3=$(now)
grep -E '^(new|gone|  moved)' "$tmp/triage.out" | sed 's/^/  /'
python3 - "$head/triage.json" "$tmp/again.json" <<'PY'
import json, math, sys
t = json.load(open(sys.argv[1]))
again = json.load(open(sys.argv[2]))
bound = math.ceil(math.log2(64)) + 3
for i in t["items"]:
    for s in i["searches"]:
        ok = "within" if s["probes"] <= bound else "ABOVE"
        print(f"{i['change']} {i['signature']['message']!r}: {s['state']}, {s['probes']} probes over {s['points']} commits ({ok} the bound {bound})")
now = sum(s["probes_now"] for i in again["items"] for s in i["searches"])
print(f"second triage: {now} probes")
PY
echo "run + triage: $(secs "$t0" "$t1") s; second triage: $(secs "$t2" "$t3") s"
