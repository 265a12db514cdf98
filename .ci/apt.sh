# apt_get ARGS…: apt-get that waits for another apt or dpkg process (such as
# unattended upgrades on a fresh cloud machine) instead of failing at once
# with "E: Could not get lock /var/lib/dpkg/lock-frontend"; it waits up to
# APT_LOCK_TIMEOUT seconds (600), without a terminal (DEBIAN_FRONTEND).
#
# Sourced, not run, by scripts/smoke and .ci/install-*.sh (scripts/test runs
# only .ci/install-*.sh, so this file is not run on its own).
#
# apt's DPkg::Lock::Timeout makes it wait for the dpkg locks. `apt-get update`
# takes /var/lib/apt/lists/lock, which that option does not cover (apt 2.6
# fails at once there too), so an update is tried again every 5 s while apt
# says another process holds a lock.
APT_LOCK_TIMEOUT=${APT_LOCK_TIMEOUT:-600}

apt_get() {
    if [ "${1:-}" != update ]; then
        DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout="$APT_LOCK_TIMEOUT" "$@"
        return
    fi
    local deadline=$((SECONDS + APT_LOCK_TIMEOUT)) err rc said=
    err=$(mktemp)
    while :; do
        rc=0
        apt-get -o DPkg::Lock::Timeout="$APT_LOCK_TIMEOUT" "$@" 2>"$err" || rc=$?
        if [ "$rc" -ne 0 ] && [ "$SECONDS" -lt "$deadline" ] && grep -q "Could not get lock" "$err"; then
            if [ -z "$said" ]; then
                echo "apt-get update: another process holds apt's lock; waiting up to ${APT_LOCK_TIMEOUT} s" >&2
                said=1
            fi
            sleep 5
            continue
        fi
        cat "$err" >&2
        rm -f "$err"
        return "$rc"
    done
}
