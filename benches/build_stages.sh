#!/usr/bin/env bash
# Benchmark: the flagship build matrix (matrix/rocprim.yaml) with build
# stages against the same matrix building in every cell.
#
#   benches/build_stages.sh [GFX...]      default: gfx1030 gfx1100
#
# Both variants are written from matrix/rocprim.yaml with its `gfx` axis set
# to the targets given (not `--only`: a build compiles for every gfx of the
# whole plan, so a subset taken with --only would still build them all):
#
#   stages    the file as it is: one build per suite for all its gfx, the
#             cells start from its snapshot;
#   per cell  no `build:`; its steps go first in every cell, compiling for
#             that cell's gfx only (`build.gfx` becomes `matrix.gfx`).
#
# Both start cold: each variant gets a ccache volume of its own, and a
# comment with a fresh nonce in its first step, so no snapshot of an earlier
# run is reused. The environment image is built (or reused) before anything
# is timed. Cells run 2 at a time in both. Prints both wall times and the
# ratio, and the CPU time (user + sys) the compile steps report: on a host
# shared with other work, wall time favours the variant with more processes
# (it takes a larger share of the CPUs), CPU time does not. Needs the engine, debian:sid and the Debian archive (the image
# build fetches rocPRIM's source). ROCMATRIX_BIN picks the binary (default:
# a release build).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${ROCMATRIX_BIN:-}" ]; then
    cargo build --release --quiet
    ROCMATRIX_BIN=target/release/rocmatrix
fi
bin=$ROCMATRIX_BIN
gfx=("$@")
[ ${#gfx[@]} -gt 0 ] || gfx=(gfx1030 gfx1100)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
nonce=$(date +%s%N)
label="rocmatrix.bench=build-stages-$nonce"

python3 - matrix/rocprim.yaml "$tmp" "$nonce" "${gfx[@]}" <<'PY'
import copy, pathlib, re, sys
import yaml

src, out, nonce, gfx = sys.argv[1], pathlib.Path(sys.argv[2]), sys.argv[3], sys.argv[4:]
spec = yaml.safe_load(open(src))
spec["matrix"]["gfx"] = gfx

def cold(m, variant):
    for c in m.get("cache", []):
        c["key"] += f"-bench-{nonce}-{variant}"
    first = (m["build"]["steps"] if "build" in m else m["steps"])[0]
    first["run"] = f"# bench {nonce} {variant}\n" + first["run"]
    return m

def dump(m, name):
    (out / name).write_text(yaml.safe_dump(m, sort_keys=False, width=1 << 20))

dump(cold(copy.deepcopy(spec), "stages"), "stages.yaml")

per_cell = copy.deepcopy(spec)
build = per_cell.pop("build")
steps = build["steps"]
for step in steps:
    step["run"] = re.sub(r"build\.gfx\s*\|\s*join\([^)]*\)", "matrix.gfx", step["run"])
per_cell["steps"] = steps + per_cell["steps"]
dump(cold(per_cell, "per-cell"), "per-cell.yaml")

warm = copy.deepcopy(spec)
warm.pop("build"); warm.pop("cache", None)
warm["steps"] = [{"name": "warm", "run": "true"}]
dump(warm, "warm.yaml")
PY

run() { nice -n 19 "$bin" --label "$label" run "$@" --jobs 2 --progress quiet; }
now() { date +%s.%N; }

# Warm-up: the environment image (rocPRIM's source unpacked in it).
run "$tmp/warm.yaml" --only "gfx=${gfx[0]}" --out "$tmp/warm" >/dev/null

t0=$(now); run "$tmp/stages.yaml" --out "$tmp/stages" >/dev/null; t1=$(now)
run "$tmp/per-cell.yaml" --out "$tmp/per-cell" >/dev/null; t2=$(now)

# Drop the snapshots and cache volumes this benchmark made.
"$bin" --label "$label" images --prune --caches >/dev/null

python3 - "$tmp" "${#gfx[@]}" "${gfx[*]}" "$t0" "$t1" "$t2" <<'PY'
import pathlib, re, sys
tmp, n, gfx = pathlib.Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
t0, t1, t2 = map(float, sys.argv[4:])
stages, per_cell = t1 - t0, t2 - t1

def cpu(variant, where):
    # The `compile time:` lines of the compile steps' logs (bash's `time`).
    # Cold means no ccache hits: `ccache --show-stats` follows the compile.
    total, hits, logs = 0.0, 0, list((tmp / variant).glob(f"runs/*/{where}/*/logs/*compile.log"))
    for log in logs:
        text = log.read_text()
        m = re.search(r"compile time: \S+ s wall, (\S+) s user, (\S+) s sys", text)
        h = re.search(r"Hits:\s+(\d+) /", text)
        if not m or not h:
            sys.exit(f"no `compile time:` or ccache `Hits:` line in {log}")
        total += float(m[1]) + float(m[2])
        hits += int(h[1])
    if hits:
        sys.exit(f"{variant}: {hits} ccache hits: not a cold build")
    return total, len(logs)

s_cpu, s_n = cpu("stages", "builds")
c_cpu, c_n = cpu("per-cell", "cells")
print(f"matrix/rocprim.yaml, sid x {n} gfx ({gfx}), cold ccache, --jobs 2")
print(f"build stages ({s_n} build, {n} cells): {stages:7.1f} s wall, compile {s_cpu:7.1f} s CPU")
print(f"per cell ({c_n} builds in cells)    : {per_cell:7.1f} s wall, compile {c_cpu:7.1f} s CPU")
print(f"per cell / stages: {per_cell / stages:.2f}x wall, {c_cpu / s_cpu:.2f}x CPU")
PY
