//! The package download cache on the real engine: a second image build of
//! the same family and suite takes its `.deb` files from the cache, on the
//! bridge and on the host network, and the lock's package list is the one
//! a build without the cache records.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::harness::docker::tag_for_run;
use crate::harness::*;

/// A sid environment with a few small packages, listed in the order given:
/// each order is its own install step, which the engine's layer cache
/// cannot answer from another run's build; `nonce` makes each run's image
/// its own.
fn matrix(packages: &str, nonce: &str) -> String {
    format!(
        r#"name: package-cache
matrix:
  suite: [sid]
environment:
  family: debian
  base: "debian:{{{{ matrix.suite }}}}"
  suite: "{{{{ matrix.suite }}}}"
  packages: [{packages}]
  env:
    CACHE_TEST_NONCE: "{nonce}"
retries: 0
steps:
  - name: hello
    run: hello && test -x /usr/games/sl && figlet ok
"#
    )
}

struct Built {
    packages: BTreeMap<String, String>,
    tag: String,
    /// `images/package-cache.log`, empty when the cache was off.
    cache_log: String,
    build_log: String,
    stdout: String,
}

fn build(
    dir: &Path,
    cache: &Path,
    name: &str,
    packages: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> Built {
    let nonce = format!("{name}-{}", tag_for_run("x"));
    let m = write(dir, &format!("{name}.yaml"), &matrix(packages, &nonce));
    let out = dir.join(name);
    let mut cmd = Rocmatrix::run_matrix(&m)
        .progress_plain()
        .args(extra)
        .env("ROCMATRIX_CACHE", cache)
        .out(&out);
    for (k, v) in env {
        cmd = cmd.env(k, v);
    }
    let o = cmd.run();
    o.assert_success();
    let run = o.run_store();
    let lock = read_json(&run.join("lock.json"));
    let envs = lock["environments"].as_object().unwrap();
    assert_eq!(envs.len(), 1, "{lock:#}");
    let locked = envs.values().next().unwrap();
    assert_eq!(
        locked["image"]["reused"],
        Value::Bool(false),
        "{}",
        o.context()
    );
    let packages = serde_json::from_value(locked["packages"].clone()).unwrap();
    let images = run.join("images");
    let build_log = std::fs::read_dir(&images)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            let n = p.file_name().unwrap().to_string_lossy().into_owned();
            n.ends_with(".log") && !n.starts_with("base-") && n != "package-cache.log"
        })
        .map(|p| std::fs::read_to_string(p).unwrap())
        .unwrap_or_default();
    assert!(
        build_log.contains(" hello amd64 "),
        "the install step did not run (a layer from an earlier build?):\n{build_log}"
    );
    Built {
        packages,
        tag: locked["image"]["tag"].as_str().unwrap().to_string(),
        cache_log: std::fs::read_to_string(images.join("package-cache.log")).unwrap_or_default(),
        build_log,
        stdout: o.text(),
    }
}

/// The URLs of `kind` (`hit`, `stored`) in a package-cache.log.
fn lines<'a>(log: &'a str, kind: &str) -> Vec<&'a str> {
    log.lines()
        .filter_map(|l| l.strip_prefix(kind)?.strip_prefix(' '))
        .collect()
}

/// The package files among them (indexes by hash change with the archive).
fn debs<'a>(log: &'a str, kind: &str) -> Vec<&'a str> {
    let mut v: Vec<&str> = lines(log, kind)
        .into_iter()
        .filter(|u| u.ends_with(".deb"))
        .collect();
    v.sort();
    v
}

#[test]
fn a_second_build_takes_its_packages_from_the_cache_and_locks_the_same() {
    let Some(_engine) =
        engine_or_skip("a_second_build_takes_its_packages_from_the_cache_and_locks_the_same")
    else {
        return;
    };
    bases::ensure("sid");
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");

    let plain = build(
        dir.path(),
        &cache,
        "off",
        "hello, sl, figlet",
        &[],
        &[("ROCMATRIX_PACKAGE_CACHE", "off")],
    );
    let _plain_image = RemoveOnDrop(plain.tag.clone());
    assert!(plain.cache_log.is_empty(), "{}", plain.cache_log);
    assert!(
        plain.build_log.contains("# package cache: none"),
        "{}",
        plain.build_log
    );
    assert!(
        !cache.join("downloads").exists(),
        "the cache was off but got files"
    );

    let first = build(
        dir.path(),
        &cache,
        "first",
        "sl, figlet, hello",
        &["--network", "bridge"],
        &[],
    );
    let _first_image = RemoveOnDrop(first.tag.clone());
    assert!(
        first.build_log.contains("# package cache: http://"),
        "the bridge build did not use the cache:\n{}\n{}",
        first.stdout,
        first.build_log
    );
    let stored = debs(&first.cache_log, "stored");
    assert!(
        stored.iter().any(|u| u.contains("/hello_")) && stored.iter().any(|u| u.contains("/sl_")),
        "{}",
        first.cache_log
    );
    assert!(
        lines(&first.cache_log, "hit").is_empty(),
        "{}",
        first.cache_log
    );
    for url in &stored {
        let path = url.strip_prefix("http://").unwrap();
        assert!(
            cache.join("downloads").join(path).is_file(),
            "{url} is not in the cache"
        );
    }

    // The same family and suite again, now on the host network.
    let second = build(
        dir.path(),
        &cache,
        "second",
        "figlet, hello, sl",
        &["--network", "host"],
        &[],
    );
    let _second_image = RemoveOnDrop(second.tag.clone());
    assert_eq!(debs(&second.cache_log, "hit"), stored, "{}", second.stdout);
    assert!(
        debs(&second.cache_log, "stored").is_empty(),
        "{}",
        second.cache_log
    );
    let hits = lines(&second.cache_log, "hit");
    assert!(
        second
            .stdout
            .contains(&format!("{} files served", hits.len())),
        "{}",
        second.stdout
    );

    // What the lock records does not depend on the cache.
    assert!(!plain.packages.is_empty());
    assert_eq!(first.packages, plain.packages);
    assert_eq!(second.packages, plain.packages);
    // Nor does the image: no proxy in its configuration or apt's.
    let o = docker::docker([
        "run",
        "--rm",
        &second.tag,
        "sh",
        "-c",
        "env | grep -i proxy; grep -ri proxy /etc/apt; true",
    ]);
    assert_eq!(stdout(&o), "", "{}", stderr(&o));
    let o = docker::docker([
        "image",
        "inspect",
        "--format",
        "{{json .Config.Env}}",
        &first.tag,
    ]);
    assert!(
        !stdout(&o).to_lowercase().contains("proxy"),
        "{}",
        stdout(&o)
    );
}
