//! Which version of `autopkgtest: {source: NAME}` a cell fetches (issue 51,
//! item 1): the newest its Sources index holds, by dpkg's own ordering, as
//! `apt-get source` chooses, unless the matrix pins one
//! (`source: NAME=VERSION`). On Debian's real sid index, where rocm-hipamd
//! has two records (the old one kept for binaries still in sid): `choose`
//! of the fetch script on the host's dpkg, over rocm-hipamd and every
//! other source the index holds more than once; then a real sid cell.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use rocmatrix::autopkgtest::script::CHOOSE;

use crate::harness::*;

/// The source with two records in sid that issue 51 met.
const HIPAMD: &str = "rocm-hipamd";

/// `choose SRC PIN WHERE VERSION…` on the host: its exit status, `ver`,
/// and what it said.
fn choose(src: &str, pin: &str, versions: &[&str]) -> (i32, String, String) {
    let script = format!("{CHOOSE}\nchoose \"$@\"; rc=$?; echo \"ver=${{ver:-}}\"; exit $rc");
    let o = Command::new("bash")
        .args(["-c", &script, "choose", src, pin, "sid"])
        .args(versions)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let ver = out
        .lines()
        .find_map(|l| l.strip_prefix("ver="))
        .unwrap_or_default()
        .to_string();
    (o.status.code().unwrap_or(-1), ver, out)
}

/// `dpkg --compare-versions A OP B`.
fn dpkg(a: &str, op: &str, b: &str) -> bool {
    Command::new("dpkg")
        .args(["--compare-versions", a, op, b])
        .status()
        .unwrap()
        .success()
}

/// Each source of Debian's real sid index (main) with its versions, in
/// index order; `None` (after the gate said why) without the network.
fn sid_sources(test: &str, dir: &Path) -> Option<BTreeMap<String, Vec<String>>> {
    let xz = dir.join("Sources.xz");
    let got = Command::new("curl")
        .args(["-fsSL", "--max-time", "300", "-o"])
        .arg(&xz)
        .arg("http://deb.debian.org/debian/dists/sid/main/source/Sources.xz")
        .output();
    if !got.as_ref().is_ok_and(|o| o.status.success()) {
        unavailable(test, "Debian's sid Sources index could not be downloaded");
        return None;
    }
    let text = Command::new("xz").arg("-dc").arg(&xz).output().unwrap();
    assert!(text.status.success(), "xz: {}", stderr(&text));
    let mut all: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for record in String::from_utf8_lossy(&text.stdout).split("\n\n") {
        let field = |name: &str| {
            record
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .map(|v| v.trim().to_string())
        };
        if let (Some(p), Some(v)) = (field("Package:"), field("Version:")) {
            all.entry(p).or_default().push(v);
        }
    }
    assert!(all.len() > 10_000, "{} sources", all.len());
    Some(all)
}

#[test]
fn autopkgtest_source_choose_orders_versions_as_dpkg_does() {
    let test = "autopkgtest_source_choose_orders_versions_as_dpkg_does";
    if !have("dpkg", &["--version"], test) {
        return;
    }
    // (older, newer): chosen the newer, given in either order.
    for (old, new) in [
        ("1.0~rc1", "1.0"),
        ("2.0", "1:0.9"),
        ("1.0-1", "1.0-1+b1"),
        ("5.7.1-7", "6.4.3-5"),
        ("1.9", "1.10"),
        ("1.0a", "1.0.1"),
        ("1.0", "1.0a"),
        ("1.0~", "1.0"),
        ("1.0~~", "1.0~"),
        ("1.0~~a", "1.0~"),
        ("1.0-1", "1.0-1.1"),
        ("1.0-9", "1.0-10"),
        ("8.23.0~rc3-1", "8.23.0-1"),
        ("1:1.37.0-6", "1:1.37.0-10.1"),
        ("0.74-3-5", "0.75~svn4494-1"),
    ] {
        for order in [[old, new], [new, old]] {
            let (rc, ver, said) = choose("x", "", &order);
            assert_eq!((rc, ver.as_str()), (0, new), "{order:?}: {said}");
            assert!(
                said.contains(&format!(
                    "x: 2 versions in the index ({old}, {new}); chose {new}, the newest, as apt-get source does"
                )),
                "{said}"
            );
        }
    }
    // Equal versions by dpkg are one; a pin matches by dpkg's equality.
    let (rc, ver, said) = choose("x", "", &["1.0", "0:1.0"]);
    assert_eq!((rc, ver.as_str()), (0, "1.0"), "{said}");
    assert!(
        said.contains("x: 1 version in the index (1.0); chose 1.0, the only one"),
        "{said}"
    );
    let (rc, ver, said) = choose("x", "0:1.0", &["2.0", "1.0"]);
    assert_eq!((rc, ver.as_str()), (0, "1.0"), "{said}");
    assert!(said.contains("chose 1.0, pinned by the matrix"), "{said}");
}

#[test]
fn autopkgtest_source_choose_in_debians_real_sid_index_is_the_newest() {
    let test = "autopkgtest_source_choose_in_debians_real_sid_index_is_the_newest";
    if !have("dpkg", &["--version"], test) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(all) = sid_sources(test, dir.path()) else {
        return;
    };
    let hipamd: Vec<&str> = all[HIPAMD].iter().map(String::as_str).collect();
    eprintln!("{test}: sid holds {HIPAMD} {hipamd:?}");
    assert!(hipamd.len() >= 2, "{hipamd:?}");
    let (rc, newest, said) = choose(HIPAMD, "", &hipamd);
    assert_eq!(rc, 0, "{said}");
    for v in &hipamd {
        assert!(dpkg(&newest, "ge", v), "{newest} < {v}: {said}");
    }
    assert!(
        said.contains(&format!(
            "chose {newest}, the newest, as apt-get source does"
        )),
        "{said}"
    );
    // Issue 51 met 5.7.1-7 beside 6.4.3-5; a later upload moves the newest.
    if hipamd.contains(&"6.4.3-5") {
        assert!(dpkg(&newest, "ge", "6.4.3-5"), "{newest}");
    }
    let oldest = hipamd.iter().find(|v| **v != newest).unwrap();
    let (rc, ver, said) = choose(HIPAMD, oldest, &hipamd);
    assert_eq!((rc, ver.as_str()), (0, *oldest), "{said}");
    assert!(
        said.contains(&format!("chose {oldest}, pinned by the matrix")),
        "{said}"
    );
    let (rc, _, said) = choose(HIPAMD, "0.1-1", &hipamd);
    assert_eq!(rc, 3, "{said}");
    assert!(
        said.contains(&format!(
            "unserved: the Sources index of sid holds {HIPAMD} {}, not 0.1-1, the version the matrix pins",
            sorted(&hipamd).join(", ")
        )),
        "{said}"
    );

    // Every source sid holds more than once (epochs, `~rc`, `+debNuN`,
    // revisions of two and three parts): the choice is the newest of its
    // records. One bash for them all.
    let many: Vec<(&String, &Vec<String>)> = all.iter().filter(|(_, v)| v.len() > 1).collect();
    assert!(many.len() >= 10, "{}", many.len());
    let lines: String = many
        .iter()
        .map(|(p, v)| format!("{p} {}\n", v.join(" ")))
        .collect();
    let script = format!(
        "{CHOOSE}\nwhile read -r src versions; do choose \"$src\" '' sid $versions >/dev/null || exit 1; echo \"$src $ver\"; done"
    );
    let list = dir.path().join("many");
    std::fs::write(&list, lines).unwrap();
    let o = Command::new("bash")
        .args(["-c", &script])
        .stdin(std::fs::File::open(&list).unwrap())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let chosen: BTreeMap<String, String> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(p, v)| (p.to_string(), v.to_string()))
        .collect();
    assert_eq!(chosen.len(), many.len());
    for (p, versions) in many {
        let c = &chosen[p.as_str()];
        assert!(versions.contains(c), "{p}: {c} of {versions:?}");
        for v in versions {
            assert!(dpkg(c, "ge", v), "{p}: chose {c}, below {v}");
        }
    }
}

/// `versions` in dpkg's order.
fn sorted<'a>(versions: &[&'a str]) -> Vec<&'a str> {
    let mut v = versions.to_vec();
    v.sort_by(|a, b| {
        if dpkg(a, "lt", b) {
            std::cmp::Ordering::Less
        } else if dpkg(a, "gt", b) {
            std::cmp::Ordering::Greater
        } else {
            std::cmp::Ordering::Equal
        }
    });
    v
}

/// A real sid cell: `source: rocm-hipamd` fetches the newest (the step log
/// says so, and the cell is not the fetch error issue 51 met), a pin on
/// the older record fetches that one, a pin the index lacks is a cell
/// error naming the versions it holds.
#[test]
fn autopkgtest_source_in_a_real_sid_cell_is_the_version_apt_get_source_fetches() {
    let test = "autopkgtest_source_in_a_real_sid_cell_is_the_version_apt_get_source_fetches";
    if !have("dpkg", &["--version"], test) {
        return;
    }
    let Some(_engine) = engine_or_skip(test) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let Some(all) = sid_sources(test, dir.path()) else {
        return;
    };
    let hipamd = sorted(&all[HIPAMD].iter().map(String::as_str).collect::<Vec<_>>());
    assert!(hipamd.len() >= 2, "{hipamd:?}");
    let (oldest, newest) = (hipamd[0], hipamd[hipamd.len() - 1]);
    bases::ensure("sid");
    let m = write(
        dir.path(),
        "a.yaml",
        &format!(
            "name: source-version\nmatrix:\n  suite: [sid]\n  pin: [newest, oldest, absent]\n\
             environment:\n  base: debian:sid\n  packages: [autopkgtest, dpkg-dev]\n\
             steps:\n  - name: tests\n    timeout: 30m\n    autopkgtest:\n      \
             source: \"{HIPAMD}{{{{ {{'newest': '', 'oldest': '={oldest}', 'absent': '=0.1-1'}}[matrix.pin] }}}}\"\n"
        ),
    );
    let o = Rocmatrix::run_matrix(&m)
        .progress_plain()
        .out(dir.path().join("out"))
        .run();
    let run = o.run_store();
    let log = |cell: &str| {
        std::fs::read_to_string(run.join("cells").join(cell).join("logs/01-tests.log"))
            .unwrap_or_else(|e| panic!("{cell}: {e}\n{}", o.context()))
    };
    let list = hipamd.join(", ");

    let text = log("sid.newest");
    assert!(
        text.contains(&format!(
            "rocmatrix-autopkgtest: {HIPAMD}: {} versions in the index ({list}); chose {newest}, the newest, as apt-get source does",
            hipamd.len()
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!("rocmatrix-autopkgtest: source {HIPAMD} {newest} ")),
        "{text}"
    );
    let cell = cell_json(&run, "sid.newest");
    let reason = cell["reason"].as_str().unwrap_or_default();
    assert!(!reason.contains("autopkgtest source"), "{cell:#}");
    eprintln!("{test}: {HIPAMD} {newest}: {} ({reason})", cell["status"]);

    let text = log("sid.oldest");
    assert!(
        text.contains(&format!("; chose {oldest}, pinned by the matrix")),
        "{text}"
    );
    assert!(
        text.contains(&format!("rocmatrix-autopkgtest: source {HIPAMD} {oldest} ")),
        "{text}"
    );

    let cell = cell_json(&run, "sid.absent");
    assert_eq!(cell["status"], "error", "{cell:#}");
    assert_eq!(
        cell["reason"].as_str().unwrap(),
        format!(
            "autopkgtest source {HIPAMD}=0.1-1: the Sources index of sid holds {HIPAMD} {list}, not 0.1-1, the version the matrix pins"
        ),
        "{cell:#}"
    );
}

/// `source: NAME=VERSION` is checked with the matrix file: a literal one
/// where it is written, a template for each cell it renders for (exit 2,
/// file:line:column).
#[test]
fn autopkgtest_source_pins_are_checked_with_the_matrix_file() {
    let dir = tempfile::tempdir().unwrap();
    let head = "name: pins\nmatrix:\n  v: ['6.4.3-5', 'v6.4']\nsteps:\n  - name: tests\n    autopkgtest:\n";
    for (source, line_col, says) in [
        (
            "rocm-hipamd=v6.4",
            "a.yaml:7:15: ",
            "`v6.4` is not a Debian version ([EPOCH:]UPSTREAM[-REVISION]): the upstream version does not start with a digit",
        ),
        (
            "rocm-hipamd=",
            "a.yaml:7:15: ",
            "`rocm-hipamd=`: the version after `=` is empty",
        ),
        ("ROCm-hipamd", "a.yaml:7:15: ", "`ROCm-hipamd` is not a Debian source package name"),
        (
            "'rocm-hipamd={{ matrix.v }}'",
            "a.yaml:7:15: ",
            "steps[0].autopkgtest.source: `v6.4` is not a Debian version ([EPOCH:]UPSTREAM[-REVISION]): the upstream version does not start with a digit (rendering cell v6.4)",
        ),
    ] {
        let m = write(dir.path(), "a.yaml", &format!("{head}      source: {source}\n"));
        let o = Rocmatrix::new().arg("validate").arg(&m).run();
        o.assert_code(2);
        let text = o.text();
        assert!(
            text.contains(&format!("{line_col}{says}")),
            "{source}: {line_col}{says}\n{}",
            o.context()
        );
    }
    let m = write(
        dir.path(),
        "a.yaml",
        &format!("{head}      source: 'rocm-hipamd=1:{{{{ matrix.v }}}}'\n")
            .replace("'v6.4'", "'6.4.3-6'"),
    );
    Rocmatrix::new()
        .arg("validate")
        .arg(&m)
        .run()
        .assert_success();
}
