# Sourced by the benchmarks that run matrix/smoke.yaml cold (smoke_cache.sh,
# build_jobs.sh): a scratch directory, the benchmark's image label, removal
# of what carries it, and the smoke matrix on bases of the benchmark's own
# repository, so that the engine's `debian:*` images are never touched.

# smoke_bench_setup NAME REPOSITORY: sets `tmp` and `label`
# (rocmatrix.bench=NAME-<pid>), removes the
# labelled images and `tmp` on exit, and writes "$tmp/smoke.yaml" with its
# bases as REPOSITORY:<suite>. Exits 2 when REPOSITORY images already exist.
smoke_bench_setup() {
  local name=$1 repo=$2 me
  me=$(basename "$0" .sh)
  tmp=$(mktemp -d)
  label="rocmatrix.bench=$name-$$"
  trap 'remove_images; rm -rf "$tmp"' EXIT
  sed "s|base: \"debian:{{ matrix.suite }}\"|base: \"$repo:{{ matrix.suite }}\"|" \
    matrix/smoke.yaml > "$tmp/smoke.yaml"
  grep -q "$repo" "$tmp/smoke.yaml" || {
    echo "$me: matrix/smoke.yaml has no base line to rewrite" >&2
    exit 2
  }
  if docker images --format '{{.Repository}}' | grep -qx "$repo"; then
    echo "$me: $repo images exist (another run of this benchmark?)" >&2
    exit 2
  fi
}

# Removes every image carrying `label`, environment images first: they
# stand on the bases.
remove_images() {
  local ids
  ids=$(docker images -q --filter "label=$label" | sort -u)
  for kind in env snapshot base; do
    for id in $(docker images -q --filter "label=$label" --filter "label=rocmatrix.kind=$kind" | sort -u); do
      docker rmi -f "$id" >/dev/null 2>&1 || true
    done
  done
  for id in $ids; do docker rmi -f "$id" >/dev/null 2>&1 || true; done
}
