//! Distribution families: `containers/<family>/profile.yaml` and
//! `Containerfile.j2`, compiled into the binary, and rendering an
//! environment's Containerfile from them.

use minijinja::{Environment as Jinja, UndefinedBehavior};
use serde::{Deserialize, Serialize};

use crate::plan::Environment;

/// How a family installs and lists packages, and how it gets ROCm.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub family: String,
    pub description: String,
    /// Shell installing `{{ packages }}` during an image build.
    pub install: String,
    /// How one pinned package is written: `{{ name }}`, `{{ version }}`.
    pub pin: String,
    /// Refreshes package indexes (before checking pins).
    pub refresh: String,
    /// Succeeds when `{{ pin }}` (also `{{ name }}`, `{{ version }}`) is installable.
    pub available: String,
    /// Prints `name<TAB>version` per installed package.
    pub list_packages: String,
    /// In words: how ROCm of a given version is obtained.
    pub rocm: String,
    /// How a missing base image is made: `debootstrap` or `none`.
    pub bootstrap: String,
    /// Containerfile lines added for `environment.llvm: debug`.
    pub debug_llvm: String,
    /// The image build's script for `environment.llvm: {debug: source}`:
    /// fetch, unpack and patch the LLVM source at `/usr/src/llvm-source`
    /// and install the build's tools (`{{ version }}`, `{{ tools }}`).
    #[serde(default)]
    pub llvm_source: Option<String>,
    /// One sh command adding the environment's archives (`{{ mirror }}`
    /// serving `{{ suite }}`, `{{ suites }}` beside it); run by the image
    /// build and before checking `--locked` pins. Families whose templates
    /// handle archives themselves leave it out.
    #[serde(default)]
    pub sources: Option<String>,
}

/// Why a family cannot be loaded or cannot render its snippets and templates.
#[derive(Debug, thiserror::Error)]
pub enum FamilyError {
    #[error("unknown distribution family `{name}` (known: {})", names().join(", "))]
    Unknown { name: String },
    #[error("containers/{family}/profile.yaml: {}", .source.located())]
    Profile {
        family: String,
        #[source]
        source: crate::yaml::DeError,
    },
    #[error("containers/{family}/Containerfile.j2: {source}")]
    Containerfile {
        family: String,
        #[source]
        source: minijinja::Error,
    },
    /// A profile snippet (install, pin, available) failed to render.
    #[error(transparent)]
    Render(minijinja::Error),
}

/// A distribution family.
#[derive(Debug, Clone)]
pub struct Family {
    pub profile: Profile,
    pub template: &'static str,
}

const FAMILIES: &[(&str, &str, &str)] = &[
    (
        "debian",
        include_str!("../../containers/debian/profile.yaml"),
        include_str!("../../containers/debian/Containerfile.j2"),
    ),
    (
        "fedora",
        include_str!("../../containers/fedora/profile.yaml"),
        include_str!("../../containers/fedora/Containerfile.j2"),
    ),
    (
        "arch",
        include_str!("../../containers/arch/profile.yaml"),
        include_str!("../../containers/arch/Containerfile.j2"),
    ),
    (
        "gentoo",
        include_str!("../../containers/gentoo/profile.yaml"),
        include_str!("../../containers/gentoo/Containerfile.j2"),
    ),
];

/// The names of the families rocmatrix knows.
pub fn names() -> Vec<&'static str> {
    FAMILIES.iter().map(|(n, _, _)| *n).collect()
}

impl Family {
    /// The family called `name` (`ubuntu` is the Debian family).
    pub fn get(name: &str) -> Result<Family, FamilyError> {
        let name = if name == "ubuntu" { "debian" } else { name };
        let (_, profile, template) =
            FAMILIES
                .iter()
                .find(|(n, _, _)| *n == name)
                .ok_or_else(|| FamilyError::Unknown {
                    name: name.to_string(),
                })?;
        let profile: Profile =
            crate::yaml::from_str(profile).map_err(|source| FamilyError::Profile {
                family: name.to_string(),
                source,
            })?;
        Ok(Family { profile, template })
    }

    /// The Containerfile for `env` on top of `base_image`.
    pub fn containerfile(
        &self,
        env: &Environment,
        base_image: &str,
        hash: &str,
    ) -> Result<String, FamilyError> {
        let mut j = Jinja::new();
        j.set_undefined_behavior(UndefinedBehavior::Chainable);
        j.set_trim_blocks(true);
        j.set_lstrip_blocks(true);
        j.add_filter("shquote", |s: String| shell_quote(&s));
        let install = render_str(
            &self.profile.install,
            minijinja::context! {
                packages => env.packages.iter().map(|p| shell_quote(p)).collect::<Vec<_>>().join(" "),
            },
        )?;
        let ctx = minijinja::context! {
            env => env,
            profile => &self.profile,
            install => install,
            base_image => base_image,
            apt_suite => apt_suite(env),
            sources => self.sources_script(env)?,
            hash => hash,
            llvm_source => matches!(env.llvm, crate::plan::Llvm::Source(_)),
        };
        let in_template = |source| FamilyError::Containerfile {
            family: self.profile.family.clone(),
            source,
        };
        j.add_template("Containerfile", self.template)
            .map_err(in_template)?;
        let t = j
            .get_template("Containerfile")
            .map_err(FamilyError::Render)?;
        t.render(ctx).map_err(in_template)
    }

    /// The image build's script that prepares an LLVM source build, or an
    /// error when this family has none.
    pub fn llvm_source_script(&self, src: &crate::plan::LlvmSource) -> Result<String, FamilyError> {
        let Some(t) = &self.profile.llvm_source else {
            return Err(FamilyError::Render(minijinja::Error::new(
                minijinja::ErrorKind::InvalidOperation,
                format!(
                    "family {} has no recipe for building LLVM from source \
                     (environment.llvm: {{debug: source}}); use debug: packages",
                    self.profile.family
                ),
            )));
        };
        render_str(
            t,
            minijinja::context! {
                version => src.version.clone().unwrap_or_default(),
                git => src.from_tree,
                tools => &src.tools,
                targets => &src.targets,
            },
        )
    }

    /// `name` pinned at `version`, as the installer writes it.
    pub fn pin(&self, name: &str, version: &str) -> Result<String, FamilyError> {
        render_str(
            &self.profile.pin,
            minijinja::context! { name => name, version => version },
        )
    }

    /// The sh command adding `env`'s archives (the profile's `sources`);
    /// empty when it adds none.
    pub fn sources_script(&self, env: &Environment) -> Result<String, FamilyError> {
        let Some(t) = &self.profile.sources else {
            return Ok(String::new());
        };
        let text = render_str(
            t,
            minijinja::context! {
                mirror => env.mirror,
                suite => apt_suite(env),
                suites => env.suites,
            },
        )?;
        Ok(text.trim().to_string())
    }

    /// A script printing every pin of `pins` that can no longer be installed
    /// from `env`'s archives (its `sources` first, then a refresh).
    pub fn missing_pins_script(
        &self,
        env: &Environment,
        pins: &[(String, String)],
    ) -> Result<String, FamilyError> {
        let sources = self.sources_script(env)?;
        let mut script = if sources.is_empty() {
            String::new()
        } else {
            // In a subshell, so that its `set -e` cannot end the check: if
            // the archives cannot be added, the pins only they serve are
            // listed as missing. (Its output would read as missing pins.)
            format!("( {sources} ) >/dev/null 2>&1 || true\n")
        };
        script.push_str(&format!("{}\n", self.profile.refresh));
        for (name, version) in pins {
            let pin = shell_quote(&self.pin(name, version)?);
            let check = render_str(
                &self.profile.available,
                minijinja::context! { pin => pin, name => shell_quote(name), version => version },
            )?;
            script.push_str(&format!("{check} || printf '%s\\n' {pin}\n"));
        }
        Ok(script)
    }

    /// The shell command listing installed packages.
    pub fn list_packages(&self) -> &str {
        &self.profile.list_packages
    }
}

/// The suite an `environment.mirror` serves this environment: `suite` when
/// given, else the base image's tag (`debian:trixie` → `trixie`), as the
/// matrix docs say; `sid` for a base without a usable tag (a tarball).
fn apt_suite(env: &Environment) -> String {
    if let Some(s) = env.suite.as_deref().filter(|s| !s.is_empty()) {
        return s.to_string();
    }
    let name = env.base.rsplit('/').next().unwrap_or(&env.base);
    let name = name.split('@').next().unwrap_or(name);
    match name.rsplit_once(':') {
        Some((_, tag)) if !tag.is_empty() && tag != "latest" => tag.to_string(),
        _ => "sid".to_string(),
    }
}

fn render_str(template: &str, ctx: minijinja::Value) -> Result<String, FamilyError> {
    let mut j = Jinja::new();
    j.set_undefined_behavior(UndefinedBehavior::Strict);
    j.add_filter("shquote", |s: String| shell_quote(&s));
    j.render_str(template, ctx).map_err(FamilyError::Render)
}

/// Quotes a word for POSIX sh when it needs quoting.
pub fn shell_quote(s: &str) -> String {
    crate::plan::ci::shell_quote(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_loads() {
        for n in names() {
            let f = Family::get(n).unwrap();
            assert_eq!(f.profile.family, n);
        }
        assert!(Family::get("ubuntu").is_ok());
        assert!(Family::get("solaris")
            .unwrap_err()
            .to_string()
            .contains("known: debian"));
    }
}
