#!/usr/bin/env bash
# Removes what test runs made in the container engine: every container,
# network, volume and image labelled rocmatrix.test-run=VALUE (made by the
# tests) or rocmatrix.test-fixture=VALUE (made by the tests to stand for a
# user's). Nothing else is touched: images are removed by tag or id without
# force, so one that a container of somebody else uses stays.
#
#   sweep.sh VALUE...               the runs named
#   sweep.sh --dead [--keep VALUE]  every run of this host whose process is
#                                   gone (VALUE is <hostname>-<pid>-<time>)
#
# Used by scripts/test after `cargo test` and by the test harness at start
# (tests/it/harness/label.rs). Says what it removed on stderr; exit 0 unless
# something labelled is left — with --dead, what a dead run left in use (a
# base it bootstrapped that a live run's images are built on) is said and
# left for a later sweep, not an error.
set -uo pipefail
keys=(rocmatrix.test-run rocmatrix.test-fixture)

if ! docker info >/dev/null 2>&1; then
    exit 0
fi

# Every value of the keys above on this engine, one a line.
values() {
    local key ids
    for key in "${keys[@]}"; do
        docker ps -a --filter "label=$key" --format "{{.Label \"$key\"}}"
        docker volume ls --filter "label=$key" --format "{{.Label \"$key\"}}"
        docker network ls --filter "label=$key" --format "{{.Label \"$key\"}}"
        ids=$(docker images -a -q --filter "label=$key" | sort -u)
        if [ -n "$ids" ]; then
            # shellcheck disable=SC2086
            docker image inspect --format "{{index .Config.Labels \"$key\"}}" $ids
        fi
    done 2>/dev/null | sort -u | grep -v '^$'
}

# Whether the run VALUE belongs to this host and its process is gone.
dead() {
    local v=$1 rest pid host
    rest=${v%-*}
    pid=${rest##*-}
    host=${rest%-*}
    [[ $v =~ ^.+-[0-9]+-[0-9]+$ ]] || return 1
    [ "$host" = "$(cat /proc/sys/kernel/hostname)" ] || return 1
    [ ! -e "/proc/$pid" ]
}

remove() {
    local v=$1 key f n left lines line id ref removed round
    for key in "${keys[@]}"; do
        f="label=$key=$v"
        n=0
        for id in $(docker ps -a -q --filter "$f"); do
            docker rm -f -v "$id" >/dev/null 2>&1 && n=$((n + 1))
        done
        [ "$n" -gt 0 ] && echo "sweep: removed $n container(s) of $key=$v" >&2
        for id in $(docker network ls -q --filter "$f"); do
            docker network rm "$id" >/dev/null 2>&1 && echo "sweep: removed network $id of $key=$v" >&2
        done
        for id in $(docker volume ls -q --filter "$f"); do
            docker volume rm "$id" >/dev/null 2>&1 && echo "sweep: removed volume $id of $key=$v" >&2
        done
        # Children before parents: repeat while something goes.
        for round in 1 2 3 4 5 6 7 8; do
            mapfile -t lines < <(docker images -a --filter "$f" --format '{{.ID}} {{.Repository}}:{{.Tag}}')
            [ ${#lines[@]} -eq 0 ] && break
            removed=0
            for line in "${lines[@]}"; do
                id=${line%% *}
                ref=${line#* }
                case $ref in *'<none>'*) ref=$id ;; esac
                if docker rmi "$ref" >/dev/null 2>&1; then
                    echo "sweep: removed image $ref of $key=$v" >&2
                    removed=1
                fi
            done
            [ $removed -eq 0 ] && break
        done
    done
    left=0
    for key in "${keys[@]}"; do
        f="label=$key=$v"
        n=$(( $(docker ps -a -q --filter "$f" | wc -l) + $(docker images -a -q --filter "$f" | wc -l) \
            + $(docker volume ls -q --filter "$f" | wc -l) + $(docker network ls -q --filter "$f" | wc -l) ))
        if [ "$n" -gt 0 ]; then
            echo "sweep: $n thing(s) labelled $key=$v are left (in use?)" >&2
            left=1
        fi
    done
    return $left
}

status=0
if [ "${1:-}" = --dead ]; then
    keep=
    if [ "${2:-}" = --keep ]; then keep=${3:-}; fi
    while read -r v; do
        [ "$v" = "$keep" ] && continue
        if dead "$v"; then
            echo "sweep: test run $v is gone; removing what it left" >&2
            remove "$v" || true
        fi
    done < <(values)
else
    for v in "$@"; do
        remove "$v" || status=1
    done
fi
exit $status
