#!/usr/bin/env bash
# Benchmark: what a Slurm job array costs over running the same shards
# locally one after another (docs/cluster.md's closing note).
#
# A matrix of CELLS trivial cells (default 8) cut into SHARDS shards
# (default 4). Timed, ROUNDS times (default 3; medians printed):
#   local:  `rocmatrix run M --shard K/N --jobs 1` for K = 1..N, one after
#           another, then `report merge` of the N run stores;
#   array:  `rocmatrix run M --executor slurm --shards N` (submit, follow,
#           merge) on a one-node Slurm cluster this script starts from
#           Debian's packages (as tests/it/harness/slurm.rs does: its own
#           config, state, munge socket and ports, ended by pid), with
#           `--jobs 1` in each task and the node allowing one task at a time
#           (CPUs=1), so both do the same work one shard after another; the
#           difference is the array's cost: sbatch, scheduling, slurmstepd,
#           the follower's one-second squeue, the merge.
# Needs root, Docker, debian:bookworm in the engine and .ci/install-slurm.sh.
# ROCMATRIX_BIN=path times that binary instead of this tree's debug build.
set -euo pipefail
cd "$(dirname "$0")/.."
CELLS=${CELLS:-8}
SHARDS=${SHARDS:-4}
ROUNDS=${ROUNDS:-3}
if [ -n "${ROCMATRIX_BIN:-}" ]; then
  bin=$(realpath "$ROCMATRIX_BIN")
else
  cargo build --quiet
  bin=$(realpath target/debug/rocmatrix)
fi
tmp=$(mktemp -d)
pids=()
cleanup() {
  SLURM_CONF=$tmp/slurm.conf scancel --user root >/dev/null 2>&1 || true
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill "${pids[i]}" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
mkdir -p "$tmp"/{munge,state,spool,log}
mungekey -c -k "$tmp/munge/munge.key"
cat > "$tmp/slurm.conf" <<CONF
ClusterName=rocmatrix-bench
SlurmctldHost=localhost
SlurmctldPort=$(port)
SlurmdPort=$(port)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$tmp/munge/socket
CredType=cred/munge
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/log/slurmctld.log
SlurmdLogFile=$tmp/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerParameters=batch_sched_delay=0
MpiDefault=none
ReturnToService=2
NodeName=benchnode NodeHostname=localhost NodeAddr=127.0.0.1 CPUs=1 State=UNKNOWN
PartitionName=bench Nodes=benchnode Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF=$tmp/slurm.conf
munged --force --foreground --socket="$tmp/munge/socket" --key-file="$tmp/munge/munge.key" \
  --pid-file="$tmp/munge/pid" --log-file="$tmp/munge/log" --seed-file="$tmp/munge/seed" \
  >"$tmp/log/munged.out" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [ -S "$tmp/munge/socket" ] && break; sleep 0.05; done
slurmctld -D -f "$SLURM_CONF" >"$tmp/log/ctld.out" 2>&1 &
pids+=($!)
slurmd -D -N benchnode -f "$SLURM_CONF" >"$tmp/log/slurmd.out" 2>&1 &
pids+=($!)
for _ in $(seq 600); do [ "$(sinfo -h -o %t 2>/dev/null)" = idle ] && break; sleep 0.1; done
[ "$(sinfo -h -o %t)" = idle ] || { echo "the bench cluster did not come up" >&2; tail "$tmp"/log/*; exit 1; }

values=$(seq -s, 1 "$CELLS")
cat > "$tmp/m.yaml" <<YAML
name: slurm-bench
matrix:
  n: [$values]
environment:
  base: debian:bookworm
steps:
  - name: true
    run: "true"
YAML
# Warm-up: the environment image, made before anything is timed.
"$bin" run "$tmp/m.yaml" --only n=1 --out "$tmp/warm" --progress quiet >/dev/null

now() { date +%s.%N; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
local_times=() array_times=()
for r in $(seq "$ROUNDS"); do
  t0=$(now)
  for k in $(seq "$SHARDS"); do
    "$bin" run "$tmp/m.yaml" --shard "$k/$SHARDS" --jobs 1 --out "$tmp/local-$r" \
      --progress quiet >/dev/null
  done
  "$bin" report merge "$tmp/local-$r"/runs/* --out "$tmp/local-$r/report" >/dev/null
  local_times+=("$(echo "$(now) - $t0" | bc)")
  t0=$(now)
  (cd "$tmp" && "$bin" run m.yaml --executor slurm --shards "$SHARDS" --jobs 1 \
    --slurm-dir "$tmp/array-$r" >/dev/null 2>&1)
  array_times+=("$(echo "$(now) - $t0" | bc)")
  echo "round $r: local ${local_times[-1]} s, array ${array_times[-1]} s" >&2
done
l=$(printf '%s\n' "${local_times[@]}" | median)
a=$(printf '%s\n' "${array_times[@]}" | median)
printf '%s cells in %s shards, medians of %s rounds:\n' "$CELLS" "$SHARDS" "$ROUNDS"
printf '  local, shards one after another + report merge: %6.2f s\n' "$l"
printf '  Slurm array (submit, follow, merge):            %6.2f s\n' "$a"
printf '  array overhead: %.2f s in all, %.2f s per task\n' \
  "$(echo "$a - $l" | bc)" "$(echo "($a - $l) / $SHARDS" | bc -l)"
