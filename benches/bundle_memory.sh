#!/usr/bin/env bash
# The bundle scanner's memory and time on real Debian libraries (issue 34,
# item 7): peak RSS (`/usr/bin/time -v`'s "Maximum resident set size") and
# wall time of
#
#   rocmatrix bundles librocsparse.so.1.0          (experimental, 7.2.4: compressed bundles)
#   rocmatrix bundles librocsparse.so.0.1          (trixie, 5.7.1: one plain bundle)
#   rocmatrix bundles librocblas.so.5.*            (experimental, 7.2.4)
#   rocmatrix bundles libMIOpen.so.1.*             (experimental, 7.2.4)
#   rocmatrix coverage NEW --against OLD --gfx …   (the two unpacked packages)
#
# then, "after" alone, `bundles --verify` of the first (every compressed
# bundle decompressed whole, its size and hash checked: the zstd window's
# cost, which a plain listing no longer pays).
#
# for the scanner before the streaming change and after it, the median of
# ROUNDS rounds each, the two binaries interleaved, page cache warm. The two
# outputs of each command must be byte-identical (stdout and stderr).
#
#   benches/bundle_memory.sh [ROUNDS]
#
# ROCMATRIX_BIN (default target/release/rocmatrix, built if missing) is
# "after"; ROCMATRIX_BEFORE_BIN is "before", or else it is built from the git
# commit ROCMATRIX_BEFORE_REF (default: the commit before the one that made
# the scanner stream, i.e. added src/bundle/region.rs) into a target
# directory of its own under the cache. The .deb files come from
# deb.debian.org (exact names from the suites' Packages indexes) and are
# cached with the unpacked libraries under
# ${ROCMATRIX_TEST_CACHE:-target/test-cache}/bundle-memory.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
rounds=${1:-3}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
cache=${ROCMATRIX_TEST_CACHE:-target/test-cache}/bundle-memory
mkdir -p "$cache"
cache=$(realpath "$cache")

if [ ! -x /usr/bin/time ]; then
    echo "installing GNU time (for its peak RSS)…" >&2
    # shellcheck source=../.ci/apt.sh
    . .ci/apt.sh
    apt_get update -qq && apt_get install -y -qq time >/dev/null
fi

after=${ROCMATRIX_BIN:-target/release/rocmatrix}
[ -x "$after" ] || cargo build --release --bin rocmatrix
after=$(realpath "$after")

before=${ROCMATRIX_BEFORE_BIN:-}
if [ -z "$before" ]; then
    ref=${ROCMATRIX_BEFORE_REF:-}
    if [ -z "$ref" ]; then
        added=$(git log --format=%H --diff-filter=A -1 -- src/bundle/region.rs)
        [ -n "$added" ] || { echo "no commit adds src/bundle/region.rs: set ROCMATRIX_BEFORE_REF" >&2; exit 2; }
        ref=$added^
    fi
    sha=$(git rev-parse "$ref")
    src=$cache/before-src-${sha:0:12}
    if [ ! -x "$cache/before-target/release/rocmatrix-${sha:0:12}" ]; then
        echo "building the scanner of ${sha:0:12} (before)…" >&2
        rm -rf "$src" && mkdir -p "$src"
        git archive "$sha" | tar -x -C "$src"
        (cd "$src" && CARGO_TARGET_DIR=$cache/before-target cargo build --release --bin rocmatrix)
        cp "$cache/before-target/release/rocmatrix" "$cache/before-target/release/rocmatrix-${sha:0:12}"
        rm -rf "$src"
    fi
    before=$cache/before-target/release/rocmatrix-${sha:0:12}
fi
before=$(realpath "$before")

# fetch SUITE PACKAGE: the .deb of PACKAGE in SUITE's main/binary-amd64,
# cached and unpacked; prints the unpacked root.
fetch() {
    local suite=$1 pkg=$2 index file deb root
    index=$cache/Packages-$suite
    if [ ! -s "$index" ]; then
        curl -fsSL --retry 3 "$mirror/dists/$suite/main/binary-amd64/Packages.xz" | xz -dc >"$index.part"
        mv "$index.part" "$index"
    fi
    file=$(awk -v p="$pkg" '$1 == "Package:" { cur = $2 } cur == p && $1 == "Filename:" { print $2; exit }' "$index")
    [ -n "$file" ] || { echo "$pkg not in $suite's Packages" >&2; exit 2; }
    deb=$cache/$(basename "$file")
    if [ ! -s "$deb" ]; then
        echo "downloading $file…" >&2
        curl -fsSL --retry 3 -o "$deb.part" "$mirror/$file"
        mv "$deb.part" "$deb"
    fi
    root=$cache/root-$(basename "$deb" .deb)
    if [ ! -e "$root/.done" ]; then
        rm -rf "$root" && mkdir -p "$root"
        dpkg-deb -x "$deb" "$root"
        touch "$root/.done"
    fi
    echo "$root"
}

new_root=$(fetch experimental librocsparse1)
old_root=$(fetch trixie librocsparse0)
blas_root=$(fetch experimental librocblas5)
miopen_root=$(fetch experimental libmiopen1)
new_lib=$(find "$new_root" -name 'librocsparse.so.*' -type f | head -1)
old_lib=$(find "$old_root" -name 'librocsparse.so.*' -type f | head -1)
blas_lib=$(find "$blas_root" -name 'librocblas.so.*' -type f | head -1)
miopen_lib=$(find "$miopen_root" -name 'libMIOpen.so.*' -type f | head -1)
echo "before: $before" >&2
echo "after:  $after" >&2
ls -l "$new_lib" "$old_lib" "$blas_lib" "$miopen_lib" >&2
cat "$new_lib" "$old_lib" "$blas_lib" "$miopen_lib" >/dev/null # warm the page cache

commands=(
    "bundles $new_lib"
    "bundles $old_lib"
    "bundles $blas_lib"
    "bundles $miopen_lib"
    "coverage $new_root --against $old_root --gfx gfx90a,gfx942,gfx1030,gfx1100"
)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# One timed run: appends "rss_kib seconds" to $work/<c>-<which>.
measure() {
    local c=$1 which=$2 bin=$3 args
    read -r -a args <<<"${commands[$c]}"
    /usr/bin/time -v -o "$work/time" "$bin" "${args[@]}" >"$work/out-$c-$which" 2>"$work/err-$c-$which" || true
    awk -F': ' '/Maximum resident set size/ { rss = $2 }
        /Elapsed \(wall clock\)/ { n = split($2, t, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + t[i] }
        END { print rss, s }' "$work/time" >>"$work/$c-$which"
}

for ((r = 1; r <= rounds; r++)); do
    for c in "${!commands[@]}"; do
        measure "$c" before "$before"
        measure "$c" after "$after"
    done
    echo "round $r of $rounds done" >&2
done

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
printf '%-78s %-6s %14s %10s\n' command binary "peak RSS MiB" "wall s"
for c in "${!commands[@]}"; do
    for which in before after; do
        rss=$(awk '{ print $1 }' "$work/$c-$which" | median)
        secs=$(awk '{ print $2 }' "$work/$c-$which" | median)
        printf '%-78s %-6s %14.1f %10.2f\n' "rocmatrix ${commands[$c]//$cache\//}" "$which" "$(awk -v k="$rss" 'BEGIN { print k / 1024 }')" "$secs"
    done
    if cmp -s "$work/out-$c-before" "$work/out-$c-after" && cmp -s "$work/err-$c-before" "$work/err-$c-after"; then
        echo "  output (stdout, stderr): identical"
    else
        echo "  output DIFFERS:"
        diff "$work/out-$c-before" "$work/out-$c-after" | head -20 || true
        diff "$work/err-$c-before" "$work/err-$c-after" | head -20 || true
    fi
done
echo "(median of $rounds rounds, interleaved; $(nproc) cores; cache $cache)"
/usr/bin/time -v -o "$work/time" "$after" bundles --verify "$new_lib" >"$work/out-verify" 2>&1 || true
cmp -s "$work/out-verify" "$work/out-0-after" && same="output identical to the listing" || same="output DIFFERS"
awk -F': ' -v same="$same" '/Maximum resident set size/ { rss = $2 }
    /Elapsed \(wall clock\)/ { n = split($2, t, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + t[i] }
    END { printf "after, bundles --verify (each compressed bundle decompressed whole, hash checked): %.1f MiB, %.2f s, %s\n", rss / 1024, s, same }' "$work/time"
