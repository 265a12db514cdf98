//! CDI without a GPU: a spec whose device node is backed by a host node
//! (/dev/zero), with environment, a read-only bind mount and hooks (their
//! stand-ins run before the steps, which still run as the main process), applied
//! by `rocmatrix run` to a real container; unknown names and malformed
//! specs refused with the spec file named; the specs generated for the KFD
//! fixtures and for NVIDIA's /proc files (captured on a real H100 host)
//! kept as golden files.

use std::path::Path;

use crate::harness::*;

fn spec_dir(dir: &Path) -> std::path::PathBuf {
    let lib = dir.join("lib");
    std::fs::create_dir_all(&lib).unwrap();
    std::fs::write(lib.join("file.txt"), "from the host\n").unwrap();
    let specs = dir.join("cdi");
    std::fs::create_dir_all(&specs).unwrap();
    write(
        &specs,
        "example.yaml",
        &format!(
            "cdiVersion: 0.6.0\nkind: example.com/gpu\ncontainerEdits:\n  env: [EXAMPLE_SHARED=yes]\ndevices:\n  - name: \"0\"\n    containerEdits:\n      deviceNodes: [{{path: /dev/example0, hostPath: /dev/zero}}]\n      env: [EXAMPLE_GPU=0]\n      mounts: [{{hostPath: {}, containerPath: /opt/example, options: [ro, bind]}}]\n      hooks:\n        - {{hookName: createContainer, path: /usr/bin/nvidia-cdi-hook, args: [nvidia-cdi-hook, create-symlinks, --link, file.txt::/opt/link/libx.so]}}\n        - {{hookName: createContainer, path: /usr/bin/nvidia-cdi-hook, args: [nvidia-cdi-hook, update-ldcache, --folder, /opt/example]}}\n        - {{hookName: createContainer, path: /usr/bin/nvidia-cdi-hook, args: [nvidia-cdi-hook, create-symlinks, --link, file.txt::/proc/no-such-dir/link]}}\n        - {{hookName: startContainer, path: /usr/bin/vendor-hook, args: [vendor-hook, --setup]}}\n  - name: \"1\"\n    containerEdits:\n      deviceNodes: [{{path: /dev/example1, hostPath: /dev/null}}]\n",
            lib.display()
        ),
    );
    specs
}

#[test]
fn a_cdi_device_reaches_the_container_with_its_node_env_mount_and_hook() {
    let test = "a_cdi_device_reaches_the_container_with_its_node_env_mount_and_hook";
    let Some(_engine) = engine_or_skip(test) else {
        return;
    };
    bases::ensure("bookworm");
    let dir = tempfile::tempdir().unwrap();
    let specs = spec_dir(dir.path());
    let m = write(
        dir.path(),
        "cdi.yaml",
        "name: cdi\nmatrix:\n  os: [bookworm]\nenvironment:\n  base: debian:bookworm\ngpu:\n  cdi: [example.com/gpu=0]\nsteps:\n  - name: device\n    run: |\n      test -c /dev/example0\n      test ! -e /dev/example1\n      echo \"zero=$(head -c 4 /dev/example0 | od -An -tx1 | tr -d ' ')\"\n      echo \"env=$EXAMPLE_GPU,$EXAMPLE_SHARED\"\n      cat /opt/example/file.txt\n      echo \"link=$(readlink /opt/link/libx.so)\"\n      if touch /opt/example/new 2>/dev/null; then echo writable; else echo read-only; fi\n      if grep -q rocmatrix-runner /proc/1/cmdline; then echo main-process; fi\n",
    );
    let o = Rocmatrix::run_matrix(&m)
        .progress_plain()
        .arg("--cdi-spec-dir")
        .arg(&specs)
        .out(dir.path().join("out"))
        .run();
    o.assert_success();
    let cell = cell_json(&o.run_store(), "bookworm");
    let tail = cell["steps"][0]["log_tail"].as_str().unwrap();
    for want in [
        "zero=00000000",
        "env=0,yes",
        "from the host",
        "link=file.txt",
        "read-only",
        // The hook stand-ins cost no exec: the steps still run as the
        // container's main process.
        "main-process",
    ] {
        assert!(tail.contains(want), "{want} missing from:\n{tail}");
    }
    assert_eq!(cell["devices"][0], "/dev/example0", "{cell:#}");
    let messages = cell["messages"].to_string();
    assert!(
        messages.contains("vendor-hook --setup") && messages.contains("is not applied"),
        "{messages}"
    );
    // A stand-in that fails is named with its exit code and output; the
    // one that succeeds (ldconfig) is not.
    assert!(
        messages.contains("CDI hook stand-in")
            && messages.contains("/proc/no-such-dir/link")
            && messages.contains("exited 1"),
        "{messages}"
    );
    assert!(!messages.contains("ldconfig"), "{messages}");
}

#[test]
fn unknown_cdi_names_and_malformed_specs_are_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let specs = spec_dir(dir.path());
    let m = write(
        dir.path(),
        "cdi.yaml",
        "name: cdi\nmatrix:\n  os: [x]\nenvironment:\n  base: debian:bookworm\ngpu:\n  cdi: [example.com/gpu=7]\nsteps:\n  - name: s\n    run: 'true'\n",
    );
    let o = Rocmatrix::run_matrix(&m)
        .arg("--cdi-spec-dir")
        .arg(&specs)
        .out(dir.path().join("out"))
        .run();
    o.assert_code(2);
    let text = o.text();
    assert!(
        text.contains("example.com/gpu=7")
            && text.contains("example.yaml")
            && text.contains("example.com/gpu=0"),
        "{text}"
    );
    write(
        &specs,
        "broken.json",
        "{\"cdiVersion\": \"0.6.0\", \"kind\": \"x.com/y\", \"devices\": [], \"bogus\": 1}",
    );
    let o = Rocmatrix::new()
        .args(["gpus", "--cdi-spec-dir"])
        .arg(&specs)
        .run();
    // `gpus` reads specs only for runs; `run` refuses the broken one.
    let _ = o;
    let o = Rocmatrix::run_matrix(&m)
        .arg("--cdi-spec-dir")
        .arg(&specs)
        .out(dir.path().join("out"))
        .run();
    o.assert_code(2);
    assert!(
        o.text().contains("broken.json") && o.text().contains("bogus"),
        "{}",
        o.text()
    );
}

#[test]
fn generated_amd_spec_for_the_gfx90a_fixture() {
    let sysfs = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kfd/gfx90a");
    let o = Rocmatrix::new()
        .args([
            "gpus",
            "--cdi",
            "--proc-root",
            "/nonexistent",
            "--dev-root",
            "/dev",
            "--sysfs-root",
        ])
        .arg(&sysfs)
        .run();
    o.assert_success();
    insta::assert_snapshot!(o.stdout());
}

/// The H100 host's own /proc files (captured by scripts/gpu-check), its
/// device nodes as empty stand-ins, and an `nvidia-smi` on the PATH that
/// answers the compute-capability query with what the real one printed.
fn h100(dir: &Path) -> (std::path::PathBuf, String) {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nvidia/h100");
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let smi = bin.join("nvidia-smi");
    std::fs::write(
        &smi,
        format!(
            "#!/bin/sh\ncat '{}'\n",
            fixture.join("compute_caps.csv").display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&smi, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    (fixture, path)
}

#[test]
fn generated_nvidia_spec_and_listing_for_the_h100_host() {
    let dir = tempfile::tempdir().unwrap();
    let (fixture, path) = h100(dir.path());
    let o = Rocmatrix::new()
        .args([
            "gpus",
            "--cdi",
            "--sysfs-root",
            "/nonexistent",
            "--proc-root",
        ])
        .arg(fixture.join("proc"))
        .arg("--dev-root")
        .arg(fixture.join("dev"))
        .env("PATH", &path)
        .run();
    o.assert_success();
    // The fake nvidia-smi's path differs from run to run.
    let spec = o.stdout().replace(dir.path().to_str().unwrap(), "[TMP]");
    insta::assert_snapshot!(spec);
    let o = Rocmatrix::new()
        .args(["gpus", "--sysfs-root", "/nonexistent", "--proc-root"])
        .arg(fixture.join("proc"))
        .arg("--dev-root")
        .arg(fixture.join("dev"))
        .env("PATH", &path)
        .run();
    // No AMD GPU, but an NVIDIA one: the host is usable, exit 0.
    o.assert_success();
    let text = o.stdout();
    assert!(
        text.contains("sm_90")
            && text.contains("GPU-6735cc68-9588-6eac-0f54-a6d75575f72b")
            && text.contains("NVIDIA H100 80GB HBM3"),
        "{text}"
    );
}
