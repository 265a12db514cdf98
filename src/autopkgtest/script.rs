//! The shell the adapter runs in the cell: fetching a source package's
//! test tree from the cell's own archive, installing Debian's
//! `autopkgtest`, and running it with its `null` virtualisation server
//! (the cell is the testbed).
//!
//! The scripts are bash, run by exec with their arguments as `$1…`; they
//! print lines starting with [`MARK`] for the adapter to read.

/// What starts a line meant for the adapter: `rocmatrix-autopkgtest: unserved: …`.
pub const MARK: &str = "rocmatrix-autopkgtest:";

/// Exit status of [`FETCH`] when the archive or the mirror cannot give the
/// test tree: the cell is an infrastructure `error`, not a failure.
pub const EXIT_UNSERVED: i64 = 3;

/// The bash function `choose SRC PIN WHERE VERSION…` (part of [`FETCH`],
/// and [`CHOOSE`] alone): sets `ver` to the version of source package `SRC`
/// to fetch among the `VERSION`s its Sources index holds: `PIN` when the
/// matrix pins one (`source: NAME=VERSION`), else the newest by dpkg's own
/// ordering (`dpkg --compare-versions`), the one `apt-get source` fetches,
/// not the one a binary still in the suite comes from (sid holds
/// rocm-hipamd 5.7.1-7 beside 6.4.3-5, for its old libraries). It says
/// which and why in a line of its own; a pin the index does not hold is an
/// `unserved:` line naming the versions it does hold (in `WHERE`), and
/// status [`EXIT_UNSERVED`].
macro_rules! choose_fn {
    () => {
        r#"choose() {
  local src=$1 pin=$2 where=$3 v s i dup sorted=() list said why
  shift 3
  # dpkg's ordering, by insertion; equal versions (0:1.0, 1.0) once.
  for v in "$@"; do
    dup=
    for s in "${sorted[@]}"; do
      if dpkg --compare-versions "$v" eq "$s"; then dup=1; break; fi
    done
    [ -n "$dup" ] && continue
    i=${#sorted[@]}
    sorted+=("$v")
    while [ "$i" -gt 0 ] && dpkg --compare-versions "${sorted[$((i - 1))]}" gt "$v"; do
      sorted[$i]=${sorted[$((i - 1))]}; i=$((i - 1))
    done
    sorted[$i]=$v
  done
  if [ "${#sorted[@]}" = 0 ]; then
    echo "rocmatrix-autopkgtest: unserved: the Sources index of $where names no version of $src"
    return 3
  fi
  list=$(printf '%s, ' "${sorted[@]}"); list=${list%, }
  if [ "${#sorted[@]}" = 1 ]; then
    said="$src: 1 version in the index ($list)"
  else
    said="$src: ${#sorted[@]} versions in the index ($list)"
  fi
  ver=
  if [ -n "$pin" ]; then
    for s in "${sorted[@]}"; do
      if dpkg --compare-versions "$s" eq "$pin"; then ver=$s; fi
    done
    if [ -z "$ver" ]; then
      echo "rocmatrix-autopkgtest: unserved: the Sources index of $where holds $src $list, not $pin, the version the matrix pins"
      return 3
    fi
    why="pinned by the matrix"
  else
    ver=${sorted[$((${#sorted[@]} - 1))]}
    why="the newest, as apt-get source does"
    [ "${#sorted[@]}" = 1 ] && why="the only one"
  fi
  echo "rocmatrix-autopkgtest: $said; chose $ver, $why"
}
"#
    };
}

/// [`FETCH`]'s `choose` function alone (its tests run it on the host's
/// dpkg over Debian's real Sources index).
pub const CHOOSE: &str = choose_fn!();

/// `FETCH SOURCE DEST [VERSION]`: the source package `SOURCE` of the
/// version `VERSION` when the matrix pins one, else the newest its Sources
/// index holds, as `apt-get source` chooses (the `choose` function above),
/// its files named by `apt-get source --print-uris`
/// from the signed Sources index and downloaded by apt's own helper against
/// their SHA-256 (`apt-get source` itself fails on mirrors that answer 404
/// for the `.dsc`, as this project's does), unpacked at `DEST`: the upstream
/// tarball when the mirror serves it, `debian/` over it, Debian's patches in
/// series order, each whole or not at all. A `debian.tar.*` (or native
/// tarball) the mirror does not serve ends it with [`EXIT_UNSERVED`] and an
/// `unserved:` line naming the file, the package and the suite.
pub const FETCH: &str = concat!(
    "set -uo pipefail\n",
    choose_fn!(),
    r#"src=$1 dest=$2 pin=${3:-}
mark=rocmatrix-autopkgtest:
export DEBIAN_FRONTEND=noninteractive
# deb-src beside every deb line, one-line and deb822 sources alike.
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
  [ -f "$f" ] && sed -n 's/^deb \(.*\)/deb-src \1/p' "$f"
done > /etc/apt/sources.list.d/zz-rocmatrix-autopkgtest-src.list
for f in /etc/apt/sources.list.d/*.sources; do
  [ -f "$f" ] && ! grep -qi '^Types:.*deb-src' "$f" && sed -i 's/^Types: *deb *$/Types: deb deb-src/I' "$f"
done
list_suites() {
  cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | awk '$1 == "deb" { print $3 }'
  sed -n 's/^Suites: *//Ip' /etc/apt/sources.list.d/*.sources 2>/dev/null | tr ' ' '\n'
}
suites=$(list_suites | awk 'NF && !s[$0]++' | paste -sd, -)
if ! apt-get update -qq; then
  echo "$mark infra: apt-get update failed in the cell"; exit 4
fi
records=$(apt-cache showsrc --only-source "$src" 2>/dev/null)
if [ -z "$records" ]; then
  echo "$mark unserved: the Sources index of ${suites:-the cell archive} has no source package $src"; exit 3
fi
versions=$(printf '%s\n' "$records" | sed -n 's/^Version: //p')
choose "$src" "$pin" "${suites:-the cell archive}" $versions || exit 3
suite=$(apt-cache madison "$src" | awk -F'|' -v v="$ver" '$3 ~ /Sources/ { gsub(/ /, "", $2); if ($2 == v) { split($3, w, " "); sub(/\/.*/, "", w[2]); print w[2]; exit } }')
suite=${suite:-$suites}
echo "$mark source $src $ver $suite"
mkdir -p "$dest.fetch" "$dest"
cd "$dest.fetch" || exit 4
uris=$(apt-get source -qq --print-uris --only-source "$src=$ver") || { echo "$mark unserved: apt-get source --print-uris found no files of $src $ver in $suite"; exit 3; }
orig= deb= native=
while read -r uri file size hash; do
  uri=${uri#\'}; uri=${uri%\'}
  case "$file" in
    *.orig-*.tar.*|*.dsc|*.asc) continue ;;
    *.orig.tar.*) kind=orig ;;
    *.debian.tar.*) kind=deb ;;
    *.tar.*) kind=native ;;
    *) continue ;;
  esac
  if [ "$kind" = orig ] && [ "$size" -gt 524288000 ]; then
    echo "$mark note: $file is $size bytes; the tests run without the upstream tree"; continue
  fi
  echo "$mark fetching $uri ($size bytes, $hash)"
  if /usr/lib/apt/apt-helper -qq download-file "$uri" "$file" "$hash" >/dev/null 2>"$file.err"; then
    eval "$kind=\$file"
  elif [ "$kind" = orig ]; then
    echo "$mark note: the mirror does not serve $file; the tests run without the upstream tree"
  else
    echo "$mark unserved: the mirror does not serve $uri ($src $ver, suite $suite): $(tail -n 1 "$file.err")"; exit 3
  fi
done <<< "$uris"
if [ -z "$deb$native" ]; then
  echo "$mark unserved: the Sources index names no debian.tar or native tarball for $src $ver in $suite"; exit 3
fi
[ -n "$orig" ] && tar -xf "$orig" -C "$dest" --strip-components=1
[ -n "$native" ] && tar -xf "$native" -C "$dest" --strip-components=1
[ -n "$deb" ] && tar -xf "$deb" -C "$dest"
cd "$dest" || exit 4
if [ -n "$orig" ] && [ -f debian/patches/series ]; then
  applied=0 skipped=0
  while read -r p opts; do
    if patch ${opts:--p1} --dry-run -s -f -N < "debian/patches/$p" >/dev/null 2>&1; then
      patch ${opts:--p1} -s -f -N < "debian/patches/$p" >/dev/null; applied=$((applied + 1))
    else skipped=$((skipped + 1)); fi
  done < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' debian/patches/series)
  echo "$mark note: Debian patches applied: $applied, not applied: $skipped"
fi
rm -rf "$dest.fetch"
echo "$mark tree $dest"
"#
);

/// `INSTALL`: Debian's `autopkgtest` (and `dpkg-dev`, which it installs
/// for an unbuilt tree anyway) from the cell's archive, unless present.
pub const INSTALL: &str = r#"set -uo pipefail
export DEBIAN_FRONTEND=noninteractive
if command -v autopkgtest >/dev/null && command -v dpkg-source >/dev/null; then
  echo "rocmatrix-autopkgtest: autopkgtest $(dpkg-query -W -f '${Version}' autopkgtest 2>/dev/null)"; exit 0
fi
apt-get update -qq || exit 4
apt-get install -y -qq --no-install-recommends autopkgtest dpkg-dev >/dev/null || exit 4
echo "rocmatrix-autopkgtest: autopkgtest $(dpkg-query -W -f '${Version}' autopkgtest)"
"#;

/// `RUN TREE WORK PER_TEST SECS LOG_BYTES`: `apt-get update` (the tests'
/// Depends are installed from the cell's archive), then autopkgtest on the unbuilt
/// tree `TREE` with its output in `WORK/out` and its summary in
/// `WORK/summary`, each test limited to `PER_TEST` seconds by autopkgtest
/// and the whole to `SECS` by `timeout`; its console output (also in
/// `WORK/out/log`) reaches the step log up to `LOG_BYTES`. Prints
/// `exit N`. Files of the output over 16 MiB are cut to that (said in
/// `WORK/out/rocmatrix-truncated`) so that copying it out stays bounded.
pub const RUN: &str = r#"set -uo pipefail
tree=$1 work=$2 per_test=$3 secs=$4 max=$5
rm -rf "$work/out" "$work/summary"
mkdir -p "$work"
# The tests' Depends come from the cell's archive: its lists, which an
# image build removes, are fetched again (nothing installed changes).
apt-get update -qq >/dev/null 2>&1 || echo "rocmatrix-autopkgtest: note: apt-get update failed; Depends come from the lists the cell has"
cd "$work" || exit 4
timeout --kill-after=15 "$secs" autopkgtest --no-built-binaries --timeout-test="$per_test" \
  --summary-file="$work/summary" --output-dir="$work/out" "$tree" -- null 2>&1 |
  { head -c "$max"; n=$(wc -c); [ "$n" -gt 0 ] && printf '\n[rocmatrix: %s more bytes of autopkgtest output are in the log of its output directory]\n' "$n"; }
rc=${PIPESTATUS[0]}
if [ -d "$work/out" ]; then
  find "$work/out" -type f -size +16M -printf '%P %s\n' > "$work/out/rocmatrix-truncated"
  find "$work/out" -type f -size +16M -exec truncate -s 16M {} +
  [ -s "$work/out/rocmatrix-truncated" ] || rm -f "$work/out/rocmatrix-truncated"
fi
echo "rocmatrix-autopkgtest: exit $rc"
"#;
