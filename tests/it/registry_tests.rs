//! `rocmatrix run --registry` against a real registry (Debian's
//! `docker-registry` on 127.0.0.1, started by each test): a first run
//! pushes, a run without the image pulls instead of building, a tampered tag
//! is caught by digest under `--locked`, and an unreachable or refusing
//! registry is one warning and a local build.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde_json::Value;

use crate::harness::registry::{docker_config, free_port, Registry};
use crate::harness::*;

/// A one-cell matrix on debian:sid whose environment is this test's alone
/// (the marker is in its setup script, so in its hash); `packages` keeps
/// the image small.
fn matrix(dir: &Path, test: &str, packages: &str) -> PathBuf {
    let text = format!(
        r#"name: registry-{test}
matrix:
  case: [one]
environment:
  base: debian:sid
  packages: [{packages}]
  setup: echo {test} {run}
retries: 0
steps:
  - name: check
    run: test -f /etc/debian_version
"#,
        run = label::value()
    );
    write(dir, "registry.yaml", &text)
}

/// The engine and debian:sid, or `None` when the test is skipped.
fn gate(test: &str) -> Option<EngineUse> {
    let engine = tools(test)?;
    bases::ensure("sid");
    Some(engine)
}

/// The engine, docker-registry and htpasswd, or `None` when the test is skipped.
fn tools(test: &str) -> Option<EngineUse> {
    let engine = engine_or_skip(test)?;
    let runs = |program: &str, args: &[&str]| {
        std::process::Command::new(program)
            .args(args)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !(runs("docker-registry", &["--version"]) && runs("htpasswd", &["-Bbn", "u", "p"]))
        && unavailable(
            test,
            "docker-registry or htpasswd is not installed (run .ci/install-registry.sh)",
        )
    {
        return None;
    }
    Some(engine)
}

/// The one environment of a run's lock: its `image` object.
fn locked_image(run: &Path) -> Value {
    let lock = read_json(&run.join("lock.json"));
    let envs = lock["environments"].as_object().expect("environments");
    assert_eq!(envs.len(), 1, "{lock:#}");
    envs.values().next().unwrap()["image"].clone()
}

fn journal(run: &Path) -> Vec<Value> {
    std::fs::read_to_string(run.join("journal.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn events<'a>(j: &'a [Value], kind: &str) -> Vec<&'a Value> {
    j.iter().filter(|e| e["event"] == kind).collect()
}

/// Seconds from the run's start to its first step: the time to first test.
fn time_to_first_test(j: &[Value]) -> f64 {
    let at = |kind: &str| -> SystemTime {
        let e = events(j, kind)[0];
        humantime::parse_rfc3339(e["time"].as_str().unwrap()).unwrap()
    };
    at("step_started")
        .duration_since(at("run_started"))
        .unwrap()
        .as_secs_f64()
}

fn run(m: &Path, out: &Path, config: &Path, args: &[&str]) -> Ran {
    Rocmatrix::run_matrix(m)
        .progress_plain()
        .env("DOCKER_CONFIG", config)
        .args(args)
        .out(out)
        .run()
}

#[test]
fn first_run_pushes_and_a_run_without_the_image_pulls_it() {
    let test = "first_run_pushes_and_a_run_without_the_image_pulls_it";
    let Some(_engine) = gate(test) else { return };
    let registry = Registry::start();
    let reference = registry.repository("rocmatrix");
    let dir = tempfile::tempdir().unwrap();
    let config = docker_config(dir.path(), None);
    let m = matrix(dir.path(), "push-pull", "hello");

    let cold = run(
        &m,
        &dir.path().join("cold"),
        &config,
        &["--registry", &reference],
    );
    cold.assert_success();
    let run1 = cold.run_store();
    let image = locked_image(&run1);
    let tag = image["tag"].as_str().unwrap();
    let hash = tag.strip_prefix("rocmatrix/env:").expect(tag);
    assert_eq!(
        registry.tags("rocmatrix/env"),
        vec![hash.to_string()],
        "the registry's tags API"
    );
    let digest = registry.digest("rocmatrix/env", hash).expect("a manifest");
    assert_eq!(
        image["registry"],
        format!("{reference}/env@{digest}"),
        "lock.json records the registry digest"
    );
    assert!(cold.stderr().contains(": built "), "{}", cold.text());
    assert!(cold.stderr().contains("pushed"), "{}", cold.text());
    let cold_secs = time_to_first_test(&journal(&run1));

    // The engine loses the image (another machine); the registry has it.
    let o = docker::docker(["rmi", "-f", image["id"].as_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));

    let warm = run(
        &m,
        &dir.path().join("warm"),
        &config,
        &["--registry", &reference],
    );
    warm.assert_success();
    let run2 = warm.run_store();
    let j = journal(&run2);
    let finished = events(&j, "image_finished");
    assert_eq!(finished.len(), 1);
    assert_eq!(finished[0]["pulled"], true, "{:#}", finished[0]);
    assert_eq!(finished[0]["reused"], false);
    assert!(!warm.stderr().contains(": built "), "{}", warm.text());
    assert!(
        !run2
            .join("images")
            .join(format!("{}.log", &hash[..12]))
            .exists()
            && std::fs::read_dir(run2.join("images"))
                .map(|d| d.count())
                .unwrap_or(0)
                <= 1,
        "a build log was written"
    );
    assert_eq!(locked_image(&run2)["registry"], image["registry"]);
    assert!(docker::image_exists(tag), "pulled image tagged {tag}");
    let pulled_secs = time_to_first_test(&j);
    println!("time to first test: cold (build + push) {cold_secs:.1} s, pulled {pulled_secs:.1} s");
}

#[test]
fn a_tampered_tag_is_caught_by_digest_under_locked() {
    let test = "a_tampered_tag_is_caught_by_digest_under_locked";
    let Some(_engine) = gate(test) else { return };
    let registry = Registry::start();
    let reference = registry.repository("rocmatrix");
    let dir = tempfile::tempdir().unwrap();
    let config = docker_config(dir.path(), None);
    let m = matrix(dir.path(), "tamper", "");

    let first = run(
        &m,
        &dir.path().join("first"),
        &config,
        &["--registry", &reference],
    );
    first.assert_success();
    let lock = first.run_store().join("lock.json");
    let image = locked_image(&first.run_store());
    let (_, hash) = image["tag"].as_str().unwrap().split_once(':').unwrap();
    let expected = image["registry"].as_str().unwrap().to_string();

    // Untouched, --locked takes the registry's image at the locked digest.
    let locked = run(
        &m,
        &dir.path().join("locked"),
        &config,
        &["--locked", lock.to_str().unwrap()],
    );
    locked.assert_success();
    assert!(
        locked.stdout().contains("pulled at the locked digest"),
        "{}",
        locked.text()
    );

    // Someone pushes other content under the same tag.
    let remote = format!("{reference}/env:{hash}");
    let ctx = tempfile::tempdir().unwrap();
    std::fs::write(
        ctx.path().join("Dockerfile"),
        "FROM debian:sid\nLABEL tampered=yes\n",
    )
    .unwrap();
    let o = docker::docker([
        "build",
        "-q",
        "--label",
        &label::label(),
        "-t",
        &remote,
        ctx.path().to_str().unwrap(),
    ]);
    assert!(o.status.success(), "docker build: {}", stderr(&o));
    let o = docker::docker(["push", &remote]);
    assert!(o.status.success(), "docker push: {}", stderr(&o));
    let found = registry.digest("rocmatrix/env", hash).unwrap();
    assert_ne!(format!("{reference}/env@{found}"), expected);

    let caught = run(
        &m,
        &dir.path().join("caught"),
        &config,
        &["--locked", lock.to_str().unwrap()],
    );
    caught.assert_code(3);
    let text = caught.text();
    let (_, expected_digest) = expected.split_once('@').unwrap();
    assert!(
        text.contains(&remote)
            && text.contains(expected_digest)
            && text.contains(&found)
            && text.contains(&hash[..12])
            && text.contains("the lock says"),
        "{text}"
    );
}

#[test]
fn an_unreachable_registry_is_a_warning_and_a_local_build() {
    let test = "an_unreachable_registry_is_a_warning_and_a_local_build";
    let Some(_engine) = gate(test) else { return };
    let dir = tempfile::tempdir().unwrap();
    let config = docker_config(dir.path(), None);
    let m = matrix(dir.path(), "unreachable", "");
    let reference = format!("127.0.0.1:{}/rocmatrix", free_port());

    let o = run(
        &m,
        &dir.path().join("out"),
        &config,
        &["--registry", &reference],
    );
    o.assert_success();
    let err = o.stderr();
    let warnings: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with(&format!("warning: registry {reference} unavailable")))
        .collect();
    assert_eq!(warnings.len(), 1, "{err}");
    assert!(warnings[0].contains("connection refused"), "{err}");
    assert!(err.contains(": built "), "{err}");
    assert!(locked_image(&o.run_store()).get("registry").is_none());
}

#[test]
fn registry_credentials_come_from_the_docker_config() {
    let test = "registry_credentials_come_from_the_docker_config";
    let Some(_engine) = gate(test) else { return };
    let registry = Registry::start_with_auth("ci", "s3cret-pw");
    let reference = registry.repository("rocmatrix");
    let dir = tempfile::tempdir().unwrap();
    let m = matrix(dir.path(), "credentials", "");

    // No credentials: a warning naming the registry, and a local build.
    let anonymous = docker_config(&dir.path().join("anon"), None);
    let o = run(
        &m,
        &dir.path().join("anon-out"),
        &anonymous,
        &["--registry", &reference],
    );
    o.assert_success();
    let err = o.stderr();
    assert!(
        err.lines()
            .filter(|l| l.starts_with(&format!("warning: registry {reference} unavailable")))
            .count()
            == 1,
        "{err}"
    );
    assert!(err.contains(": built "), "{err}");
    assert!(registry.tags("rocmatrix/env").is_empty());

    // With `auths` for the registry: pushed (the image exists locally now).
    let with_auth = docker_config(
        &dir.path().join("auth"),
        Some((&registry.addr, "ci", "s3cret-pw")),
    );
    let o = run(
        &m,
        &dir.path().join("auth-out"),
        &with_auth,
        &["--registry", &reference],
    );
    o.assert_success();
    assert!(!o.text().contains("s3cret-pw"), "a secret was printed");
    assert!(!o.stderr().contains("unavailable"), "{}", o.text());
    let image = locked_image(&o.run_store());
    let (_, hash) = image["tag"].as_str().unwrap().split_once(':').unwrap();
    assert_eq!(registry.tags("rocmatrix/env"), vec![hash.to_string()]);

    // And pulled with them, once the engine lost it.
    let o2 = docker::docker(["rmi", "-f", image["id"].as_str().unwrap()]);
    assert!(o2.status.success(), "{}", stderr(&o2));
    let o = run(
        &m,
        &dir.path().join("pull-out"),
        &with_auth,
        &["--registry", &reference],
    );
    o.assert_success();
    assert!(o.stderr().contains(": pulled "), "{}", o.text());
    assert_eq!(locked_image(&o.run_store())["registry"], image["registry"]);
}

#[test]
fn the_registry_field_is_validated_and_changes_no_hash() {
    let dir = tempfile::tempdir().unwrap();
    let body = "matrix:\n  case: [one]\nenvironment:\n  base: debian:sid\nsteps:\n  - name: s\n    run: \"true\"\n";
    let plain = write(dir.path(), "plain.yaml", &format!("name: x\n{body}"));
    let shared = write(
        dir.path(),
        "shared.yaml",
        &format!("name: x\nregistry: ghcr.io/org/rocmatrix\n{body}"),
    );
    let plan = |m: &Path| {
        let o = Rocmatrix::new()
            .args(["plan", "--format", "json"])
            .arg(m)
            .run();
        o.assert_success();
        let v: Value = serde_json::from_str(&o.stdout()).unwrap();
        (
            v["cells"][0]["environment"].clone(),
            v["cells"][0]["hash"].clone(),
        )
    };
    assert_eq!(plan(&plain), plan(&shared), "registry: changed a hash");

    let tagged = write(
        dir.path(),
        "tagged.yaml",
        &format!("name: x\nregistry: ghcr.io/org/rocmatrix:v1\n{body}"),
    );
    let o = Rocmatrix::new().arg("validate").arg(&tagged).run();
    o.assert_code(2);
    assert!(
        o.stderr()
            .contains("tagged.yaml:2:11: registry \"ghcr.io/org/rocmatrix:v1\" has a tag"),
        "{}",
        o.text()
    );
    let o = Rocmatrix::run_matrix(&plain)
        .args(["--registry", "https://x.io/r"])
        .run();
    o.assert_code(2);
    assert!(o.stderr().contains("has a scheme"), "{}", o.text());
}

#[test]
fn a_bootstrapped_base_is_pushed_and_pulled_instead_of_bootstrapped_again() {
    let test = "a_bootstrapped_base_is_pushed_and_pulled_instead_of_bootstrapped_again";
    let Some(_engine) = tools(test) else { return };
    if !have_file("/usr/sbin/debootstrap", "debootstrap", test) {
        return;
    }
    let registry = Registry::start();
    let reference = registry.repository("rocmatrix");
    let dir = tempfile::tempdir().unwrap();
    let config = docker_config(dir.path(), None);
    // A base no registry has (its host is a closed port, so the pull fails
    // at once): rocmatrix bootstraps it.
    let tag: String = label::value()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let base = format!("127.0.0.1:{}/rocmatrix-test/sid:{tag}", free_port());
    let m = write(
        dir.path(),
        "base.yaml",
        &format!(
            "name: registry-base\nmatrix:\n  case: [one]\nenvironment:\n  base: {base}\n  suite: sid\n  setup: echo base {tag}\nsteps:\n  - name: check\n    run: test -f /etc/debian_version\n"
        ),
    );
    let first = run(
        &m,
        &dir.path().join("first"),
        &config,
        &["--registry", &reference],
    );
    first.assert_success();
    let lock = read_json(&first.run_store().join("lock.json"));
    let env = lock["environments"]
        .as_object()
        .unwrap()
        .values()
        .next()
        .unwrap()
        .clone();
    assert_eq!(env["base"]["origin"]["how"], "bootstrapped", "{env:#}");
    let tags = registry.tags("rocmatrix/base");
    assert_eq!(tags.len(), 1, "{tags:?}");
    assert!(tags[0].starts_with("debian-sid-"), "{tags:?}");

    // Another machine: neither the environment nor the base is there.
    for id in [&env["image"]["id"], &env["base"]["id"]] {
        let o = docker::docker(["rmi", "-f", id.as_str().unwrap()]);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let second = run(
        &m,
        &dir.path().join("second"),
        &config,
        &["--registry", &reference],
    );
    second.assert_success();
    let j = journal(&second.run_store());
    let base_event = events(&j, "base_image")[0];
    assert_eq!(base_event["outcome"], "registry", "{base_event:#}");
    let lock = read_json(&second.run_store().join("lock.json"));
    let env2 = lock["environments"]
        .as_object()
        .unwrap()
        .values()
        .next()
        .unwrap()
        .clone();
    assert_eq!(env2["base"]["id"], env["base"]["id"], "the same base");
    assert_eq!(env2["base"]["origin"]["bootstrapped"]["suite"], "sid");
    assert_eq!(events(&j, "image_finished")[0]["pulled"], true);
}

/// A build stage's snapshot is pushed after the build; a run whose engine
/// lacks it (another machine, a later CI job) pulls it instead of building,
/// and both locks name the same registry digest.
#[test]
fn a_build_snapshot_is_pushed_and_a_run_without_it_pulls_instead_of_building() {
    let test = "a_build_snapshot_is_pushed_and_a_run_without_it_pulls_instead_of_building";
    let Some(_engine) = gate(test) else { return };
    let registry = Registry::start();
    let reference = registry.repository("rocmatrix");
    let dir = tempfile::tempdir().unwrap();
    let config = docker_config(dir.path(), None);
    let m = write(
        dir.path(),
        "staged.yaml",
        &format!(
            r#"name: registry-staged
matrix:
  gfx: [gfx1030, gfx1100]
environment:
  base: debian:sid
  setup: echo {test} {run}
retries: 0
build:
  steps:
    - name: make
      run: echo "built for {{{{ build.gfx | join(',') }}}}" > /built
steps:
  - name: check
    run: grep -q "gfx1030,gfx1100" /built
"#,
            run = label::value()
        ),
    );
    let build_json = |run: &Path| -> Value {
        let builds: Vec<_> = std::fs::read_dir(run.join("builds"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(builds.len(), 1, "{builds:?}");
        read_json(&builds[0].join("build.json"))
    };
    let first = run(
        &m,
        &dir.path().join("first"),
        &config,
        &["--registry", &reference],
    );
    first.assert_success();
    let built = build_json(&first.run_store());
    assert_eq!(built["steps"].as_array().unwrap().len(), 1, "{built:#}");
    let snapshot = built["snapshot"].as_str().unwrap().to_string();
    let hash = snapshot.strip_prefix("rocmatrix/build:").expect(&snapshot);
    assert_eq!(registry.tags("rocmatrix/build"), vec![hash.to_string()]);
    let digest = registry
        .digest("rocmatrix/build", hash)
        .expect("a manifest");
    let shared = format!("{reference}/build@{digest}");
    assert_eq!(built["registry"], shared.as_str(), "{built:#}");
    assert!(first.stderr().contains("pushed"), "{}", first.text());

    // The engine loses the snapshot; the registry has it.
    let o = docker::docker(["rmi", "-f", &snapshot]);
    assert!(o.status.success(), "{}", stderr(&o));
    let second = run(
        &m,
        &dir.path().join("second"),
        &config,
        &["--registry", &reference],
    );
    second.assert_success();
    let pulled = build_json(&second.run_store());
    assert_eq!(pulled["pulled"], true, "{pulled:#}");
    assert_eq!(pulled["steps"].as_array().unwrap().len(), 0, "nothing ran");
    assert_eq!(pulled["snapshot"], snapshot.as_str());
    assert_eq!(pulled["registry"], shared.as_str());
    assert!(
        second.stderr().contains("pulled rocmatrix/build:"),
        "{}",
        second.text()
    );
    let lock = read_json(&second.run_store().join("lock.json"));
    let locked: Vec<&Value> = lock["builds"].as_object().unwrap().values().collect();
    assert_eq!(locked[0]["registry"], shared.as_str(), "{lock:#}");
    assert!(docker::image_exists(&snapshot));
}

/// A debug-LLVM toolchain snapshot (`environment.llvm: {debug: source}`)
/// travels as `<registry>/llvm-debug:<hash>`: pushed, lost by the engine,
/// pulled back with its labels. The image is a small stand-in: the real one
/// takes most of an hour to build (tests/fixtures/debug-llvm/).
#[test]
fn a_debug_llvm_snapshot_is_pushed_and_pulled_as_llvm_debug() {
    let test = "a_debug_llvm_snapshot_is_pushed_and_pulled_as_llvm_debug";
    let Some(_engine) = gate(test) else { return };
    let registry = Registry::start();
    let reference = registry.repository("rocmatrix");
    let hash = format!("{:032x}", rand_u128());
    let tag = format!("rocmatrix/llvm-debug:{hash}");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("Dockerfile"),
        format!("FROM debian:sid\nRUN mkdir -p /opt/rocmatrix/llvm-debug/bin && echo {hash} > /opt/rocmatrix/llvm-debug/bin/stand-in\n"),
    )
    .unwrap();
    let o = docker::docker([
        "build",
        "-q",
        "-t",
        &tag,
        "--label",
        "rocmatrix.kind=llvm-debug",
        "--label",
        &label::label(),
        dir.path().to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));

    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        use rocmatrix::image::registry::{Fetched, Registries};
        let engine = rocmatrix::engine::Engine::connect().await.unwrap();
        let regs = Registries::default();
        let shared = match regs
            .share_snapshot(&engine, &reference, &tag)
            .await
            .unwrap()
        {
            Fetched::Done((r, pushed)) => {
                assert!(pushed);
                r
            }
            _ => panic!("not pushed"),
        };
        assert!(
            shared.starts_with(&format!("{reference}/llvm-debug@sha256:")),
            "{shared}"
        );
        assert_eq!(registry.tags("rocmatrix/llvm-debug"), vec![hash.clone()]);

        let o = docker::docker(["rmi", "-f", &tag]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(!docker::image_exists(&tag));
        match regs.pull_snapshot(&engine, &reference, &tag).await.unwrap() {
            Fetched::Done(r) => assert_eq!(r, shared),
            _ => panic!("not pulled"),
        }
    });
    assert!(docker::image_exists(&tag));
    let labels = docker::image_labels(&tag).unwrap();
    assert_eq!(labels["rocmatrix.kind"], "llvm-debug", "{labels:?}");
    let o = docker::docker(["rmi", "-f", &tag]);
    assert!(o.status.success(), "{}", stderr(&o));
}

fn rand_u128() -> u128 {
    let t = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    t ^ ((std::process::id() as u128) << 64)
}
