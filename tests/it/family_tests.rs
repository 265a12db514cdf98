//! Containerfiles rendered from every family in `containers/`, as snapshots.
//! Only the Debian family is built on this project's machines; these
//! snapshots are what keeps the others honest.

use std::collections::BTreeMap;

use rocmatrix::image::base::{BaseImage, BaseOrigin};
use rocmatrix::image::build::recipe;
use rocmatrix::image::Family;
use rocmatrix::plan::{Environment, Llvm};

fn env(family: &str, base: &str, llvm: Llvm) -> Environment {
    Environment {
        family: family.into(),
        base: base.into(),
        suite: None,
        mirror: None,
        packages: vec!["hipcc".into(), "rocminfo".into()],
        llvm,
        setup: Some("echo set up".into()),
        env: BTreeMap::from([("HIP_PLATFORM".to_string(), "amd".to_string())]),
        network: None,
        suites: Vec::new(),
        prefer: None,
    }
}

fn render(family: &str, base: &str, llvm: Llvm) -> String {
    let f = Family::get(family).unwrap();
    let base = BaseImage {
        reference: base.into(),
        id: "sha256:0000".into(),
        origin: BaseOrigin::Pulled,
    };
    recipe(
        &f,
        &env(family, &base.reference, llvm),
        "e3b0c44298fc",
        &base,
    )
    .unwrap()
    .containerfile
}

#[test]
fn debian_release() {
    insta::assert_snapshot!(render("debian", "debian:trixie", Llvm::Release));
}

#[test]
fn debian_debug_llvm_with_a_mirror() {
    let f = Family::get("debian").unwrap();
    let mut e = env("debian", "debian:sid", Llvm::Debug);
    e.mirror = Some("http://mirror.example/debian".into());
    e.suite = Some("sid".into());
    let base = BaseImage {
        reference: "debian:sid".into(),
        id: "sha256:0000".into(),
        origin: BaseOrigin::Pulled,
    };
    insta::assert_snapshot!(recipe(&f, &e, "e3b0c44298fc", &base).unwrap().containerfile);
}

/// `mirror` without `suite`: the sources line names the base's tag (it used
/// to say `None`, because `default()` does not replace a none value).
#[test]
fn debian_mirror_without_suite_uses_the_base_tag() {
    let f = Family::get("debian").unwrap();
    let mut e = env("debian", "debian:trixie", Llvm::Release);
    e.mirror = Some("http://mirror.example/debian".into());
    let base = BaseImage {
        reference: "debian:trixie".into(),
        id: "sha256:0000".into(),
        origin: BaseOrigin::Pulled,
    };
    let cf = recipe(&f, &e, "e3b0c44298fc", &base).unwrap().containerfile;
    assert!(
        cf.contains("'deb %s %s main\\n' http://mirror.example/debian trixie"),
        "{cf}"
    );
    assert!(!cf.contains("None"), "{cf}");
    e.base = "registry.example:5000/debian:bookworm@sha256:00".into();
    let cf = recipe(&f, &e, "e3b0c44298fc", &base).unwrap().containerfile;
    assert!(cf.contains("http://mirror.example/debian bookworm"), "{cf}");
    e.base = "/srv/rootfs.tar.gz".into();
    let cf = recipe(&f, &e, "e3b0c44298fc", &base).unwrap().containerfile;
    assert!(cf.contains("http://mirror.example/debian sid"), "{cf}");
}

#[test]
fn fedora_debug() {
    insta::assert_snapshot!(render("fedora", "fedora:41", Llvm::Debug));
}

#[test]
fn arch_debug() {
    insta::assert_snapshot!(render("arch", "archlinux:latest", Llvm::Debug));
}

#[test]
fn gentoo_debug() {
    insta::assert_snapshot!(render("gentoo", "gentoo/stage3:latest", Llvm::Debug));
}

#[test]
fn tags_follow_the_recipe_and_the_base_image() {
    let f = Family::get("debian").unwrap();
    let e = env("debian", "debian:trixie", Llvm::Release);
    let base = |id: &str| BaseImage {
        reference: "debian:trixie".into(),
        id: id.into(),
        origin: BaseOrigin::Pulled,
    };
    let a = recipe(&f, &e, "h", &base("sha256:1")).unwrap();
    let b = recipe(&f, &e, "h", &base("sha256:2")).unwrap();
    assert_ne!(
        a.tag, b.tag,
        "a new base image means a new environment image"
    );
    assert!(a.tag.starts_with("rocmatrix/env:"));
    let mut e2 = e.clone();
    e2.packages.push("gdb".into());
    assert_ne!(recipe(&f, &e2, "h", &base("sha256:1")).unwrap().tag, a.tag);
    assert_eq!(recipe(&f, &e, "h", &base("sha256:1")).unwrap().tag, a.tag);
}

/// `--locked` checks pins against the archives the environment adds, not
/// only the base's: a pin from `suites` (experimental's ROCm, an older
/// version bookworm-updates still serves) is obtainable. The image build
/// runs the same command.
#[test]
fn locked_pins_are_checked_with_the_environments_own_archives() {
    let f = Family::get("debian").unwrap();
    let mut e = env("debian", "debian:sid", Llvm::Release);
    e.suites = vec!["experimental".into()];
    let sources = f.sources_script(&e).unwrap();
    assert!(
        sources.contains("printf 'deb %s %s main\\n' \"$mirror\" experimental > /etc/apt/sources.list.d/rocmatrix-1.list"),
        "{sources}"
    );
    let script = f
        .missing_pins_script(&e, &[("hipcc".into(), "7.0.2-1~exp1".into())])
        .unwrap();
    let (added, update) = (
        script.find("rocmatrix-1.list").unwrap(),
        script.find("apt-get update").unwrap(),
    );
    assert!(added < update, "{script}");
    assert!(
        script.contains("apt-cache show 'hipcc=7.0.2-1~exp1'"),
        "{script}"
    );
    let base = BaseImage {
        reference: "debian:sid".into(),
        id: "sha256:0000".into(),
        origin: BaseOrigin::Pulled,
    };
    let cf = recipe(&f, &e, "e3b0c44298fc", &base).unwrap().containerfile;
    assert!(cf.contains(&format!("RUN {sources}")), "{cf}");
    // No archives added: nothing before the refresh.
    let plain = f
        .missing_pins_script(&env("debian", "debian:sid", Llvm::Release), &[])
        .unwrap();
    assert!(plain.starts_with("apt-get update"), "{plain}");
}
