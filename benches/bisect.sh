#!/usr/bin/env bash
# Benchmark: `rocmatrix bisect` against running every candidate in one
# sitting, on one machine.
#
#   benches/bisect.sh            both spaces below
#   benches/bisect.sh git        the git range only
#   benches/bisect.sh axis       the LLVM axis only
#
# git   A shell project made here with 64 commits on main (the integration
#       test's: commit 41 brings a failing test, 23 does not build, 50-55
#       fail otherwise), built in a `build:` stage per commit. The bisection
#       of commits 1..64 against one `run` of a matrix with a `commit` axis
#       of all 64 (`build.per: [commit]`, the same build and test steps),
#       2 cells at a time. Both cold: a nonce in the build step, so no
#       snapshot of an earlier run is reused; the environment image is made
#       before anything is timed.
# axis  matrix/hsa-metadata-yn.yaml, llvm 15..22 with args=yn gfx=gfx900,
#       `--regress success`, against `run --only args=yn --only gfx=gfx900`
#       (all four LLVMs), 2 at a time. The environment images are made (or
#       reused) before anything is timed: this measures the probes, not the
#       package downloads.
#
# Prints, per space, probes and wall time of each and the ratios. Needs the
# engine, debian:bookworm (git) and bookworm, trixie and sid with the Debian
# archive (axis). ROCMATRIX_BIN picks the binary (default: a release build).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${ROCMATRIX_BIN:-}" ]; then
    cargo build --release --quiet
    ROCMATRIX_BIN=target/release/rocmatrix
fi
bin=$(realpath "$ROCMATRIX_BIN")
what=${1:-all}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
nonce=$(date +%s%N)
label="rocmatrix.bench=bisect-$nonce"
now() { date +%s.%N; }
secs() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$2"; }
ratio() { python3 -c "import sys; print(f'{float(sys.argv[1]) / float(sys.argv[2]):.2f}')" "$1" "$2"; }
probes() { python3 -c "import json, sys; print(len(json.load(open(sys.argv[1]))['probes']))" "$1"; }

git_space() {
    local repo=$tmp/proj
    mkdir -p "$repo"
    git -C "$repo" init -q -b main
    for k in $(seq 1 64); do
        if [ "$k" = 23 ]; then
            printf '#!/bin/sh\necho "build.sh: syntax error" >&2\nexit 2\n' > "$repo/build.sh"
        else
            printf '#!/bin/sh\nset -e\nmkdir -p /work/out\ncp /src/proj/test.sh /work/out/\n' > "$repo/build.sh"
        fi
        add="4 + 6"; [ "$k" -ge 41 ] && add="4 + 7"
        {
            echo '#!/bin/sh'
            if [ "$k" -ge 50 ] && [ "$k" -le 55 ]; then
                echo "echo 'error: fixture database is locked' >&2; exit 1"
            fi
            echo "got=\$(expr $add)"
            echo 'if [ "$got" != 10 ]; then echo "sum: FAILED: expected 10, got $got"; exit 1; fi'
        } > "$repo/test.sh"
        echo "$k" > "$repo/VERSION"
        git -C "$repo" add .
        git -C "$repo" -c user.name=b -c user.email=b@example.org commit -qm "commit $k"
    done
    local first last commits
    first=$(git -C "$repo" rev-list --reverse HEAD | head -n 1)
    last=$(git -C "$repo" rev-parse HEAD)
    commits=$(git -C "$repo" rev-list --reverse HEAD | sed 's/.*/"&"/' | paste -sd, -)
    local head="name: bench-bisect
environment:
  base: debian:bookworm
  env: {BENCH: \"$nonce\"}
retries: 0
sources:
  - name: proj
    url: $repo"
    cat > "$tmp/bisect.yaml" <<EOF
$head
    ref: main
matrix:
  suite: [bookworm]
build:
  steps:
    - name: build
      run: |
        # bisect $nonce
        sh /src/proj/build.sh
steps:
  - name: test
    run: sh /work/out/test.sh
EOF
    cat > "$tmp/all.yaml" <<EOF
$head
    ref: "{{ matrix.commit }}"
matrix:
  commit: [$commits]
build:
  per: [commit]
  steps:
    - name: build
      run: |
        # all $nonce
        sh /src/proj/build.sh
steps:
  - name: test
    run: sh /work/out/test.sh
EOF
    cat > "$tmp/warm.yaml" <<EOF
$head
    ref: main
matrix:
  suite: [bookworm]
steps:
  - name: warm
    run: "true"
EOF
    nice -n 19 "$bin" --label "$label" run "$tmp/warm.yaml" --out "$tmp/warm" --progress quiet >/dev/null
    local t0 t1 t2
    t0=$(now)
    nice -n 19 "$bin" --label "$label" bisect "$tmp/bisect.yaml" --source proj \
        --good "$first" --bad "$last" --out "$tmp/b" > "$tmp/bisect.out" 2>/dev/null || true
    t1=$(now)
    nice -n 19 "$bin" --label "$label" run "$tmp/all.yaml" --jobs 2 --progress quiet \
        --out "$tmp/all" >/dev/null || true
    t2=$(now)
    local p b a
    p=$(probes "$tmp"/b/bisects/*/bisect.json)
    b=$(secs "$t0" "$t1"); a=$(secs "$t1" "$t2")
    grep -E '^(first bad|last good)' "$tmp/bisect.out" | sed 's/^/  /'
    echo "git range, 64 commits: bisect $p probes in $b s; every commit: 64 cells in $a s"
    echo "  ratio (every / bisect): probes $(ratio 64 "$p")x, wall $(ratio "$a" "$b")x"
}

axis_space() {
    local only=(--only args=yn --only gfx=gfx900)
    # Warm-up: the four environment images.
    nice -n 19 "$bin" --label "$label" run matrix/hsa-metadata-yn.yaml "${only[@]}" --jobs 2 \
        --progress quiet --out "$tmp/warm-axis" >/dev/null || true
    local t0 t1 t2
    t0=$(now)
    nice -n 19 "$bin" --label "$label" bisect matrix/hsa-metadata-yn.yaml --axis llvm \
        --bad 15 --good 22 --regress success "${only[@]}" --out "$tmp/ba" \
        > "$tmp/axis.out" 2>/dev/null || true
    t1=$(now)
    nice -n 19 "$bin" --label "$label" run matrix/hsa-metadata-yn.yaml "${only[@]}" --jobs 2 \
        --progress quiet --out "$tmp/all-axis" >/dev/null || true
    t2=$(now)
    local p b a
    p=$(probes "$tmp"/ba/bisects/*/bisect.json)
    b=$(secs "$t0" "$t1"); a=$(secs "$t1" "$t2")
    grep -E '^(first good|last bad)' "$tmp/axis.out" | sed 's/^/  /'
    echo "llvm axis, 4 values: bisect $p probes in $b s; every value: 4 cells in $a s"
    echo "  ratio (every / bisect): probes $(ratio 4 "$p")x, wall $(ratio "$a" "$b")x"
}

case $what in
    git) git_space ;;
    axis) axis_space ;;
    all) git_space; axis_space ;;
    *) echo "usage: $0 [git|axis]" >&2; exit 2 ;;
esac

# What the bench made in the engine: its snapshots and environment images
# (bases it had to bootstrap stay, for the next time).
for kind in build env; do
    docker image ls -q --filter "label=$label" --filter "label=rocmatrix.kind=$kind" \
        | xargs -r docker image rm -f >/dev/null 2>&1 || true
done
