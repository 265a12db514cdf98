#!/bin/bash
# Prepares real offload-bundle data for tests/it/bundle_tests.rs, inside a
# Debian container (debian:trixie or debian:sid) with the output directory
# mounted at /out. Run by the test harness; its results are cached.
#
#   trixie: librocfft0 (ROCm 6.1.2) unpacked, its .hip_fatbin section and what
#           clang-offload-bundler-17 --list prints for it; compressed bundles
#           from clang 18 (CCOB v1) and clang 19 (v2) (trixie's clang 17 has
#           no -compress); three of rocBLAS's bare .hsaco code objects and
#           llvm-readobj-17 --file-headers of each.
#   sid:    librocfft0 from experimental (ROCm 7.x) likewise, listed by
#           clang-offload-bundler-21; compressed bundles from clang 21 (v2 by
#           default, v3 with COMPRESSED_BUNDLE_FORMAT_VERSION=3).
#   trixie-image (for benches/bundle_scan.rs): /usr/lib of a trixie image
#           with ROCm libraries installed (rocFFT, rocRAND, RCCL, HIP, hipBLAS,
#           hipFFT and their dependencies).
set -euo pipefail
suite=$1
out=/out/$suite
export DEBIAN_FRONTEND=noninteractive
apt_opts=(-o Acquire::Check-Valid-Until=false -o Acquire::Retries=3)
if [ "$suite" = trixie-image ]; then
    apt-get "${apt_opts[@]}" update -qq
    apt-get "${apt_opts[@]}" install -y -qq --no-install-recommends librocfft0 librocrand1 \
        librccl1 libamdhip64-5 libhipblas0 libhipfft0 >/dev/null
    rm -rf "$out"
    mkdir -p "$out/usr"
    cp -a /usr/lib "$out/usr/lib"
    chmod -R a+rX "$out"
    touch "$out/done"
    exit 0
fi
if [ "$suite" = sid ]; then
    echo "deb http://deb.debian.org/debian experimental main" > /etc/apt/sources.list.d/experimental.list
    list_version=21
    compress_versions=(21)
    rocfft=librocfft0/experimental
else
    list_version=17
    compress_versions=(18 19)
    rocfft=librocfft0
fi
apt-get "${apt_opts[@]}" update -qq
versions=("$list_version" "${compress_versions[@]}")
pkgs=(binutils)
for v in "${versions[@]}"; do pkgs+=("libclang-cpp$v"); done
apt-get "${apt_opts[@]}" install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
work=$(mktemp -d)
cd "$work"
for v in "${versions[@]}"; do
    apt-get "${apt_opts[@]}" download "clang-tools-$v" "llvm-$v" >/dev/null
done
for deb in ./*.deb; do dpkg -x "$deb" /opt/tools; done
bundler() { PATH="/opt/tools/usr/lib/llvm-$1/bin:$PATH" clang-offload-bundler "${@:2}"; }

rm -rf "$out"
mkdir -p "$out/root" "$out/ccob"
apt-get "${apt_opts[@]}" download "$rocfft" >/dev/null
dpkg -x ./librocfft0_*.deb "$out/root"
dpkg-deb -f ./librocfft0_*.deb Version > "$out/rocfft.version"
so=$(find "$out/root" -name 'librocfft.so.*' -type f | head -n1)
echo "${so#"$out/root"}" > "$out/rocfft.path"
objcopy --dump-section .hip_fatbin="$out/rocfft.hip_fatbin" "$so" "$work/stripped.so"
bundler "$list_version" -list -type=o -input="$out/rocfft.hip_fatbin" > "$out/rocfft.list"

# Real code objects to compress: two device entries (a HIP-only unbundle needs
# no host entry; clang 17 cannot name trixie's `host-x86_64-unknown-linux--`
# in -targets), bundled with an empty host entry as hipcc does.
mapfile -t ids < <(grep -v '^host-' "$out/rocfft.list" | head -n2)
bundler "$list_version" -unbundle -type=o -input="$out/rocfft.hip_fatbin" \
    -targets="${ids[0]},${ids[1]}" -output=a.o -output=b.o
: > h.o
targets="host-x86_64-unknown-linux-gnu-,${ids[0]},${ids[1]}"
for v in "${compress_versions[@]}"; do
    bundler "$v" -type=o -targets="$targets" -input=h.o -input=a.o -input=b.o \
        -output="$out/ccob/clang$v-default.bundle" -compress
    if [ "$v" -ge 21 ]; then
        for fmt in 2 3; do
            COMPRESSED_BUNDLE_FORMAT_VERSION=$fmt bundler "$v" -type=o -targets="$targets" \
                -input=h.o -input=a.o -input=b.o -output="$out/ccob/clang$v-v$fmt.bundle" -compress
        done
    fi
done
# Bare code objects: rocBLAS (trixie) ships its kernels as .hsaco files, one
# per target and xnack mode; keep three and what llvm-readobj says of them.
if [ "$suite" = trixie ]; then
    mkdir -p "$out/codeobjects" rocblas
    apt-get "${apt_opts[@]}" download librocblas0 >/dev/null
    dpkg --fsys-tarfile ./librocblas0_*.deb | tar -x -C rocblas --wildcards \
        '*/Kernels.so-000-gfx90a-xnack[+-].hsaco' '*/Kernels.so-000-gfx1030.hsaco'
    find rocblas -name '*.hsaco' -exec cp {} "$out/codeobjects/" \;
    for f in "$out"/codeobjects/*.hsaco; do
        PATH="/opt/tools/usr/lib/llvm-$list_version/bin:$PATH" llvm-readobj --file-headers "$f" > "$f.headers"
    done
fi

# Each compressed bundle listed by the clang that wrote it (17 cannot read CCOB).
for f in "$out"/ccob/*.bundle; do
    v=$(basename "$f" | sed 's/^clang\([0-9]*\)-.*/\1/')
    bundler "$v" -list -type=o -input="$f" > "${f%.bundle}.list"
done
echo "$targets" | tr , '\n' > "$out/ccob/targets"
chmod -R a+rwX "$out"
touch "$out/done"
