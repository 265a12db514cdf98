//! ISA compatibility: can code built for target T run on agent A, and how.
//!
//! The rules (REFERENCE.md, "ISA compatibility"): the processors must match and
//! a feature the code leaves out means "any" while `+`/`-` must equal the
//! agent's setting (`exact`); generic targets run on their members
//! (`compatible`); `HSA_OVERRIDE_GFX_VERSION` makes an agent report a sibling
//! processor of the same major.minor family (`override`, e.g. gfx1031 runs
//! gfx1030 code with `10.3.0`); and the equivalence sets distributions patch
//! into their runtimes (`extended`). Each policy includes `compatible`.

use std::fmt;

use serde::Serialize;

use super::target::{generic_members, override_value, version_of, TargetId};
use crate::matrix_file::GpuPolicy;

/// Why code for a target runs on an agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "how", rename_all = "kebab-case")]
pub enum How {
    /// Same processor, and every feature the agent has is what the code says.
    Exact,
    /// Same processor; the code leaves features to "any" that the agent sets.
    FeatureAny,
    /// The code is for a generic target the agent's processor belongs to.
    Generic { generic: String },
    /// The agent must report another processor through
    /// `HSA_OVERRIDE_GFX_VERSION=value`.
    Override { value: String },
    /// Only a distribution's extended ISA compatibility patch runs it.
    DistroExtended,
}

impl How {
    /// Lower is better: used to prefer one code object over another.
    pub fn rank(&self) -> u8 {
        match self {
            How::Exact => 0,
            How::FeatureAny => 1,
            How::Generic { .. } => 2,
            How::DistroExtended => 3,
            How::Override { .. } => 4,
        }
    }
}

impl fmt::Display for How {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            How::Exact => f.write_str("exact"),
            How::FeatureAny => f.write_str("feature-any"),
            How::Generic { generic } => write!(f, "generic {generic}"),
            How::Override { value } => write!(f, "HSA_OVERRIDE_GFX_VERSION={value}"),
            How::DistroExtended => f.write_str("distro-extended"),
        }
    }
}

/// Extended ISA compatibility as Debian's (and Gentoo's, Solus's) patches do
/// it: `(code processors, agent processors)`.
pub const EXTENDED_SETS: &[(&[&str], &[&str])] = &[
    (
        &["gfx900", "gfx902", "gfx909", "gfx90c"],
        &["gfx900", "gfx902", "gfx906", "gfx909", "gfx90c"],
    ),
    (&["gfx1010"], &["gfx1010", "gfx1011", "gfx1012", "gfx1013"]),
    (
        &[
            "gfx1030", "gfx1031", "gfx1032", "gfx1033", "gfx1034", "gfx1035", "gfx1036",
        ],
        &[
            "gfx1030", "gfx1031", "gfx1032", "gfx1033", "gfx1034", "gfx1035", "gfx1036",
        ],
    ),
];

/// Whether the features the code sets agree with the agent's.
/// A feature the agent leaves unset (unknown, or set per process at run time)
/// accepts either setting.
fn features_match(code: &TargetId, agent: &TargetId) -> bool {
    code.features()
        .iter()
        .all(|(name, on)| agent.feature(name).is_none_or(|a| a == *on))
}

/// Same processor, features compatible: `Exact` or `FeatureAny`.
fn same_processor(code: &TargetId, agent: &TargetId) -> Option<How> {
    if code.processor() != agent.processor() || !features_match(code, agent) {
        return None;
    }
    let all_set = agent
        .features()
        .iter()
        .all(|(name, _)| code.feature(name).is_some());
    Some(if all_set { How::Exact } else { How::FeatureAny })
}

/// Can code for `code` run on an agent whose ISA is `agent`, under `policy`?
/// Returns the best way it can (lowest [`How::rank`]), or `None`.
pub fn runs_on(code: &TargetId, agent: &TargetId, policy: GpuPolicy) -> Option<How> {
    if let Some(how) = same_processor(code, agent) {
        return Some(how);
    }
    if policy == GpuPolicy::Exact {
        return None;
    }
    if let Some(members) = generic_members(code.processor()) {
        if members.contains(&agent.processor()) && features_match(code, agent) {
            return Some(How::Generic {
                generic: code.processor().to_string(),
            });
        }
        return None;
    }
    match policy {
        GpuPolicy::Extended => {
            let extended = EXTENDED_SETS.iter().any(|(codes, agents)| {
                codes.contains(&code.processor()) && agents.contains(&agent.processor())
            });
            (extended && features_match(code, agent)).then_some(How::DistroExtended)
        }
        GpuPolicy::Override => {
            let (cm, cn, _) = version_of(code.processor())?;
            let (am, an, _) = version_of(agent.processor())?;
            if (cm, cn) != (am, an) || !features_match(code, agent) {
                return None;
            }
            Some(How::Override {
                value: override_value(code.processor())?,
            })
        }
        GpuPolicy::Exact | GpuPolicy::Compatible => None,
    }
}

/// Of several code objects, the one that runs best on `agent`.
pub fn best_for<'a>(
    codes: impl IntoIterator<Item = &'a TargetId>,
    agent: &TargetId,
    policy: GpuPolicy,
) -> Option<(&'a TargetId, How)> {
    codes
        .into_iter()
        .filter_map(|c| runs_on(c, agent, policy).map(|h| (c, h)))
        .min_by_key(|(c, h)| (h.rank(), c.to_string()))
}

/// The policy's name as written on the command line and in matrix files.
pub fn policy_name(policy: GpuPolicy) -> &'static str {
    match policy {
        GpuPolicy::Exact => "exact",
        GpuPolicy::Compatible => "compatible",
        GpuPolicy::Override => "override",
        GpuPolicy::Extended => "extended",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> TargetId {
        TargetId::parse(s).unwrap()
    }

    #[test]
    fn exact_and_feature_any() {
        use GpuPolicy::*;
        assert_eq!(
            runs_on(&t("gfx1030"), &t("gfx1030"), Exact),
            Some(How::Exact)
        );
        assert_eq!(
            runs_on(&t("gfx90a"), &t("gfx90a:xnack-"), Exact),
            Some(How::FeatureAny)
        );
        assert_eq!(
            runs_on(&t("gfx90a:xnack-"), &t("gfx90a:sramecc+:xnack-"), Exact),
            Some(How::FeatureAny)
        );
        assert_eq!(
            runs_on(
                &t("gfx90a:sramecc+:xnack-"),
                &t("gfx90a:sramecc+:xnack-"),
                Exact
            ),
            Some(How::Exact)
        );
        assert_eq!(
            runs_on(&t("gfx90a:xnack+"), &t("gfx90a:xnack-"), Extended),
            None
        );
        // An agent whose xnack mode is decided at run time accepts either.
        assert_eq!(
            runs_on(&t("gfx90a:xnack+"), &t("gfx90a"), Exact),
            Some(How::Exact)
        );
        assert_eq!(runs_on(&t("gfx1030"), &t("gfx1031"), Exact), None);
    }

    #[test]
    fn generic_targets_need_compatible() {
        use GpuPolicy::*;
        assert_eq!(runs_on(&t("gfx11-generic"), &t("gfx1103"), Exact), None);
        assert_eq!(
            runs_on(&t("gfx11-generic"), &t("gfx1103"), Compatible),
            Some(How::Generic {
                generic: "gfx11-generic".into()
            })
        );
        assert_eq!(runs_on(&t("gfx11-generic"), &t("gfx1030"), Extended), None);
        assert!(runs_on(&t("gfx9-4-generic"), &t("gfx942"), Override).is_some());
        assert_eq!(
            runs_on(&t("gfx9-generic:xnack+"), &t("gfx906:xnack-"), Compatible),
            None
        );
    }

    #[test]
    fn override_stays_within_major_minor() {
        use GpuPolicy::*;
        assert_eq!(
            runs_on(&t("gfx1030"), &t("gfx1031"), Override),
            Some(How::Override {
                value: "10.3.0".into()
            })
        );
        assert_eq!(runs_on(&t("gfx1030"), &t("gfx1031"), Compatible), None);
        assert_eq!(
            runs_on(&t("gfx1100"), &t("gfx1103"), Override),
            Some(How::Override {
                value: "11.0.0".into()
            })
        );
        assert_eq!(runs_on(&t("gfx1100"), &t("gfx1030"), Override), None);
        assert_eq!(runs_on(&t("gfx1150"), &t("gfx1100"), Override), None);
    }

    #[test]
    fn extended_sets_are_directional() {
        use GpuPolicy::*;
        assert_eq!(
            runs_on(&t("gfx900"), &t("gfx906"), Extended),
            Some(How::DistroExtended)
        );
        // gfx906 code does not run on gfx900, even with the patch.
        assert_eq!(runs_on(&t("gfx906"), &t("gfx900"), Extended), None);
        assert_eq!(
            runs_on(&t("gfx1010"), &t("gfx1012"), Extended),
            Some(How::DistroExtended)
        );
        assert_eq!(runs_on(&t("gfx1012"), &t("gfx1010"), Extended), None);
        assert_eq!(
            runs_on(&t("gfx1036"), &t("gfx1031"), Extended),
            Some(How::DistroExtended)
        );
        assert_eq!(runs_on(&t("gfx1030"), &t("gfx1031"), Compatible), None);
    }

    #[test]
    fn best_prefers_exact_over_generic() {
        let codes = [t("gfx11-generic"), t("gfx1100"), t("gfx1030")];
        let (code, how) = best_for(&codes, &t("gfx1100"), GpuPolicy::Compatible).unwrap();
        assert_eq!(code, &t("gfx1100"));
        assert_eq!(how, How::Exact);
        let (code, _) = best_for(&codes, &t("gfx1101"), GpuPolicy::Override).unwrap();
        assert_eq!(code, &t("gfx11-generic"));
        assert!(best_for(&codes, &t("gfx906"), GpuPolicy::Extended).is_none());
    }
}
