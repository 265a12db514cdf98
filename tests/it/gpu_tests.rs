//! The GPU inventory, leases and checks on KFD fixtures of real machines
//! (`tests/fixtures/kfd/<machine>`, files in the sysfs format).

use std::path::{Path, PathBuf};

use rocmatrix::engine::rootless::KeepGroups;
use rocmatrix::gpu::checks::{
    rootless_checks, run_checks, Account, CheckStatus as Status, Identity, RootlessEngine,
};
use rocmatrix::gpu::{How, Inventory, LeaseRequest, Leaser, Outcome, TargetId};
use rocmatrix::matrix_file::GpuPolicy;

fn fixture(machine: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/kfd")
        .join(machine)
}

fn inventory(machine: &str) -> Inventory {
    Inventory::read(&fixture(machine)).unwrap()
}

#[test]
fn every_fixture_machine_decodes() {
    let cases: &[(&str, &[&str], u32)] = &[
        ("gfx900", &["gfx900"], 64),
        ("gfx906", &["gfx906"], 60),
        ("gfx90a", &["gfx90a", "gfx90a"], 104),
        ("gfx942", &["gfx942", "gfx942"], 304),
        ("gfx1030", &["gfx1030"], 72),
        ("gfx1031", &["gfx1031"], 40),
        ("gfx1100", &["gfx1100"], 96),
        ("apu-dgpu", &["gfx1103", "gfx1102"], 12),
    ];
    for (machine, procs, cus) in cases {
        let inv = inventory(machine);
        assert!(inv.kfd_present);
        let got: Vec<&str> = inv.gpus.iter().map(|g| g.processor.as_str()).collect();
        assert_eq!(&got, procs, "{machine}");
        assert_eq!(inv.gpus[0].compute_units, *cus, "{machine}");
        // Node 0 is the CPU and is skipped.
        assert!(inv.gpus.iter().all(|g| g.node > 0 && g.vendor_id == 4098));
    }
}

#[test]
fn rx7900xtx_details() {
    let inv = inventory("gfx1100");
    let g = &inv.gpus[0];
    assert_eq!(g.gfx_target_version, 110000);
    assert_eq!(g.device_id, 0x744c);
    assert_eq!(g.pci, "0000:03:00.0");
    assert_eq!(
        g.render_node.as_deref(),
        Some(Path::new("/dev/dri/renderD128"))
    );
    assert_eq!(g.uuid.as_deref(), Some("GPU-9e7f4de7ac7cf81b"));
    assert_eq!(g.memory_bytes, 24 << 30);
    assert_eq!(g.gpu_id, 3125);
    assert_eq!(g.wave_front_size, 32);
}

#[test]
fn apu_igpu_beside_discrete_gpu() {
    let inv = inventory("apu-dgpu");
    let (igpu, dgpu) = (&inv.gpus[0], &inv.gpus[1]);
    assert_eq!(igpu.pci, "0000:c4:00.0");
    assert_eq!(igpu.uuid, None, "APUs report unique_id 0");
    assert_eq!(igpu.memory_bytes, 512 << 20);
    assert_eq!(igpu.render_minor, Some(129));
    assert_eq!(dgpu.pci, "0000:03:00.0");
    assert_eq!(dgpu.render_minor, Some(128));
}

/// A fake /dev with the device nodes of a fixture machine.
fn fake_dev(inv: &Inventory) -> tempfile::TempDir {
    let dev = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dev.path().join("dri")).unwrap();
    std::fs::write(dev.path().join("kfd"), "").unwrap();
    for g in &inv.gpus {
        let name = g.render_node.as_ref().unwrap().file_name().unwrap();
        std::fs::write(dev.path().join("dri").join(name), "").unwrap();
    }
    dev
}

fn request(target: &str, count: u32, policy: GpuPolicy) -> LeaseRequest {
    LeaseRequest {
        target: TargetId::parse(target).unwrap(),
        count: rocmatrix::matrix_file::GpuCount::N(count),
        policy,
    }
}

#[test]
fn leases_on_the_apu_laptop_pass_only_the_leased_render_node() {
    let inv = inventory("apu-dgpu");
    let dev = fake_dev(&inv);
    let leaser = Leaser::new(&inv, dev.path());
    let Outcome::Granted(l) = leaser
        .try_lease(&request("gfx1102", 1, GpuPolicy::Exact))
        .unwrap()
    else {
        panic!("gfx1102 not granted")
    };
    let containers: Vec<&Path> = l.devices.iter().map(|d| d.container.as_path()).collect();
    assert_eq!(
        containers,
        [Path::new("/dev/kfd"), Path::new("/dev/dri/renderD128")]
    );
    assert_eq!(l.env["ROCR_VISIBLE_DEVICES"], "GPU-46f96e0b4361e355");
    // gfx1100 code runs on the iGPU (gfx1103) only with the override.
    match leaser
        .try_lease(&request("gfx1100", 1, GpuPolicy::Compatible))
        .unwrap()
    {
        Outcome::Skip(r) => assert_eq!(
            r,
            "no gfx1100 GPU on this host (policy compatible); have gfx1102, gfx1103"
        ),
        o => panic!("{o:?}"),
    }
    let Outcome::Granted(o) = leaser
        .try_lease(&request("gfx1100", 1, GpuPolicy::Override))
        .unwrap()
    else {
        panic!("override not granted")
    };
    // The discrete gfx1102 is leased already; the iGPU is what is left.
    assert_eq!(o.gpus[0].gpu.processor, "gfx1103");
    assert_eq!(o.env["HSA_OVERRIDE_GFX_VERSION"], "11.0.0");
    assert_eq!(o.env["ROCR_VISIBLE_DEVICES"], "0", "no unique_id: an index");
    assert_eq!(
        o.gpus[0].how,
        How::Override {
            value: "11.0.0".into()
        }
    );
}

#[test]
fn two_mi300x_for_one_cell() {
    let inv = inventory("gfx942");
    let dev = fake_dev(&inv);
    let leaser = Leaser::new(&inv, dev.path());
    let Outcome::Granted(l) = leaser
        .lease(&request("gfx942:sramecc+:xnack-", 2, GpuPolicy::Exact))
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(l.devices.len(), 3);
    assert_eq!(l.devices[2].container, Path::new("/dev/dri/renderD136"));
    assert_eq!(l.env["ROCR_VISIBLE_DEVICES"].split(',').count(), 2);
    assert!(matches!(
        leaser
            .try_lease(&request("gfx942", 1, GpuPolicy::Exact))
            .unwrap(),
        Outcome::Busy
    ));
}

#[test]
fn checks_on_a_fixture_host() {
    let inv = inventory("gfx1031");
    let dev = fake_dev(&inv);
    let me = Identity::current();
    let expected = [
        TargetId::parse("gfx1030").unwrap(),
        TargetId::parse("gfx1031").unwrap(),
    ];
    let checks = run_checks(&inv, dev.path(), &me, &expected, GpuPolicy::Exact);
    let by = |name: &str| checks.iter().filter(|c| c.name == name).collect::<Vec<_>>();
    assert_eq!(by("amdgpu-module")[0].status, Status::Ok);
    assert_eq!(by("kfd")[0].status, Status::Ok);
    assert_eq!(by("render-group")[0].status, Status::Ok);
    let targets = by("matrix-target");
    assert_eq!(targets[0].status, Status::Fail);
    assert!(
        targets[0].message.contains("have gfx1031"),
        "{:?}",
        targets[0]
    );
    assert_eq!(targets[1].status, Status::Ok);
    // Under the override policy the gfx1030 cells can run.
    let checks = run_checks(&inv, dev.path(), &me, &expected, GpuPolicy::Override);
    assert!(checks.iter().all(|c| c.status == Status::Ok), "{checks:?}");
}

#[test]
fn render_node_of_another_group_is_reported() {
    let inv = inventory("gfx1100");
    let dev = fake_dev(&inv);
    // Pretend to be an unprivileged user in no group.
    let nobody = Identity {
        uid: 65534,
        groups: vec![65534],
    };
    let checks = run_checks(&inv, dev.path(), &nobody, &[], GpuPolicy::Exact);
    let render = checks.iter().find(|c| c.name == "render-group").unwrap();
    assert_eq!(render.status, Status::Fail);
    assert!(render.message.contains("is not in it"), "{render:?}");
}

/// A rootless Podman user on the two-GPU APU laptop: in the groups of
/// `/dev/kfd` and both render nodes or not, with keep-groups configured,
/// not configured, or under runc (which cannot keep them).
#[test]
fn rootless_podman_user_groups_and_keep_groups() {
    use std::os::unix::fs::MetadataExt;
    let inv = inventory("apu-dgpu");
    let dev = fake_dev(&inv);
    let gid = std::fs::metadata(dev.path().join("kfd")).unwrap().gid();
    let account = |groups: Vec<u32>| Account {
        name: "ci".into(),
        home: "/home/ci".into(),
        identity: Identity { uid: 4242, groups },
    };
    let conf = std::path::PathBuf::from("/home/ci/.config/containers/containers.conf");
    let engine = |user: Account, runtime: &str, keep_groups: KeepGroups| RootlessEngine {
        user,
        runtime: Some(runtime.into()),
        keep_groups,
    };
    let status = |checks: &[rocmatrix::gpu::checks::Check]| {
        checks
            .iter()
            .map(|c| (c.name, c.status))
            .collect::<Vec<_>>()
    };

    let ready = engine(
        account(vec![4242, gid]),
        "crun",
        KeepGroups::Set(conf.clone()),
    );
    let checks = rootless_checks(&inv, dev.path(), &ready);
    assert_eq!(
        status(&checks),
        [("rootless-groups", Status::Ok), ("keep-groups", Status::Ok)],
        "{checks:?}"
    );
    assert!(
        checks[0].message.contains("3 GPU device node(s)"),
        "{checks:?}"
    );
    assert!(
        checks[1].message.contains(&conf.display().to_string()),
        "{checks:?}"
    );

    // Outside the group: kfd and both render nodes are named.
    let outside = engine(account(vec![4242]), "crun", KeepGroups::Set(conf.clone()));
    let checks = rootless_checks(&inv, dev.path(), &outside);
    assert_eq!(checks[0].status, Status::Fail);
    for node in ["kfd", "dri/renderD128", "dri/renderD129"] {
        let path = dev.path().join(node).display().to_string();
        assert!(
            checks[0]
                .message
                .contains(&format!("{path} belongs to group {gid}")),
            "{node}: {checks:?}"
        );
    }
    assert!(checks[0].message.contains("usermod -aG"), "{checks:?}");

    // keep-groups not found in the user's files: a warning that says what to set.
    let unset = engine(
        account(vec![4242, gid]),
        "crun",
        KeepGroups::NotSet {
            read: vec![conf.clone()],
        },
    );
    let checks = rootless_checks(&inv, dev.path(), &unset);
    assert_eq!(checks[1].status, Status::Warn);
    assert!(
        checks[1]
            .message
            .contains(r#"annotations = ["run.oci.keep_original_groups=1"] in [containers]"#),
        "{checks:?}"
    );
    // runc drops the groups whatever the annotation says.
    let runc = engine(account(vec![4242, gid]), "runc", KeepGroups::Set(conf));
    let checks = rootless_checks(&inv, dev.path(), &runc);
    assert_eq!(checks[1].status, Status::Fail);
    assert!(
        checks[1].message.contains("runs containers with runc"),
        "{checks:?}"
    );
    // A containers.conf Podman cannot read either.
    let broken = engine(
        account(vec![4242, gid]),
        "crun",
        KeepGroups::Unreadable(
            "/etc/containers/containers.conf: line 3: annotations: not a list of strings".into(),
        ),
    );
    let checks = rootless_checks(&inv, dev.path(), &broken);
    assert_eq!(checks[1].status, Status::Fail);
    assert!(checks[1].message.contains("line 3"), "{checks:?}");
}
