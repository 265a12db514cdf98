//! Target ids: a processor (`gfx90a`, `gfx11-generic`) plus optional
//! `:feature+` / `:feature-` settings, parsed, validated and canonicalised
//! (features sorted by name, as LLVM writes them: `gfx90a:sramecc+:xnack-`).
//!
//! Also the table of known processors: their `gfx_target_version`, their
//! `EF_AMDGPU_MACH` value in code-object `e_flags`, which features they
//! support, and the members of each generic target.

use std::fmt;
use std::str::FromStr;

/// A target id that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid gfx target `{text}`: {reason}")]
pub struct TargetError {
    pub text: String,
    pub reason: String,
}

/// A processor plus feature settings, canonical (features sorted, unique).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TargetId {
    processor: String,
    /// `(name, on)`, sorted by name; a feature not listed means "any".
    features: Vec<(String, bool)>,
}

impl TargetId {
    /// Parses `gfx90a`, `gfx90a:xnack-`, `gfx90a:xnack-:sramecc+`, `gfx9-generic`.
    pub fn parse(text: &str) -> Result<TargetId, TargetError> {
        let err = |reason: &str| TargetError {
            text: text.to_string(),
            reason: reason.to_string(),
        };
        let mut parts = text.split(':');
        let processor = parts.next().unwrap_or_default();
        if !processor.starts_with("gfx") || processor.len() < 6 {
            return Err(err("expected a processor such as gfx1030 or gfx9-generic"));
        }
        let body = &processor[3..];
        let ok = match body.strip_suffix("-generic") {
            Some(g) => {
                g.starts_with(|c: char| c.is_ascii_digit())
                    && g.bytes().all(|b| b.is_ascii_digit() || b == b'-')
                    && !g.ends_with('-')
            }
            None => {
                body.starts_with(|c: char| c.is_ascii_digit())
                    && body
                        .bytes()
                        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
            }
        };
        if !ok {
            return Err(err(
                "expected gfx + digits and hex (gfx90a) or a generic target (gfx10-3-generic)",
            ));
        }
        let mut features: Vec<(String, bool)> = Vec::new();
        for part in parts {
            let (name, on) = match part.as_bytes().last() {
                Some(b'+') => (&part[..part.len() - 1], true),
                Some(b'-') => (&part[..part.len() - 1], false),
                _ => return Err(err(&format!("feature `{part}` must end in + or -"))),
            };
            if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                return Err(err(&format!("bad feature name `{name}`")));
            }
            if features.iter().any(|(n, _)| n == name) {
                return Err(err(&format!("feature `{name}` given twice")));
            }
            features.push((name.to_string(), on));
        }
        features.sort();
        Ok(TargetId {
            processor: processor.to_string(),
            features,
        })
    }

    /// A target without feature settings.
    pub fn processor_only(processor: &str) -> TargetId {
        TargetId {
            processor: processor.to_string(),
            features: Vec::new(),
        }
    }

    /// The same processor with `features` (re-canonicalised).
    pub fn with_features(processor: &str, mut features: Vec<(String, bool)>) -> TargetId {
        features.sort();
        features.dedup_by(|a, b| a.0 == b.0);
        TargetId {
            processor: processor.to_string(),
            features,
        }
    }

    pub fn processor(&self) -> &str {
        &self.processor
    }

    pub fn features(&self) -> &[(String, bool)] {
        &self.features
    }

    /// `Some(on)` if the target sets `name`, `None` if it accepts any.
    pub fn feature(&self, name: &str) -> Option<bool> {
        self.features.iter().find(|(n, _)| n == name).map(|f| f.1)
    }

    pub fn is_generic(&self) -> bool {
        self.processor.ends_with("-generic")
    }
}

impl fmt::Display for TargetId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.processor)?;
        for (name, on) in &self.features {
            write!(f, ":{name}{}", if *on { '+' } else { '-' })?;
        }
        Ok(())
    }
}

impl FromStr for TargetId {
    type Err = TargetError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TargetId::parse(s)
    }
}

impl serde::Serialize for TargetId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// `gfx_target_version` (major·10000 + minor·100 + stepping) to a processor
/// name: major in decimal, minor and stepping in hex. `None` for 0 (a CPU) or
/// values whose minor or stepping do not fit one hex digit.
pub fn processor_from_version(version: u32) -> Option<String> {
    let (major, minor, stepping) = (version / 10000, version / 100 % 100, version % 100);
    if major == 0 || minor > 15 || stepping > 15 {
        return None;
    }
    Some(format!("gfx{major}{minor:x}{stepping:x}"))
}

/// A processor name to `(major, minor, stepping)`; `None` for generic targets.
pub fn version_of(processor: &str) -> Option<(u32, u32, u32)> {
    let digits = processor.strip_prefix("gfx")?;
    if digits.len() < 3 || !digits.is_ascii() || digits.contains('-') {
        return None;
    }
    let (major, rest) = digits.split_at(digits.len() - 2);
    let major: u32 = major.parse().ok()?;
    let minor = u32::from_str_radix(&rest[..1], 16).ok()?;
    let stepping = u32::from_str_radix(&rest[1..], 16).ok()?;
    Some((major, minor, stepping))
}

/// The `HSA_OVERRIDE_GFX_VERSION` value that makes an agent report `processor`.
pub fn override_value(processor: &str) -> Option<String> {
    version_of(processor).map(|(a, b, c)| format!("{a}.{b}.{c}"))
}

/// Facts about a processor from LLVM's `AMDGPUUsage` / `ELF.h`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Processor {
    pub name: &'static str,
    /// `EF_AMDGPU_MACH_*` value in code-object `e_flags`.
    pub mach: u32,
    pub xnack: bool,
    pub sramecc: bool,
}

macro_rules! p {
    ($n:literal, $m:literal, $x:literal, $s:literal) => {
        Processor {
            name: $n,
            mach: $m,
            xnack: $x,
            sramecc: $s,
        }
    };
}

/// Known AMDGCN processors (EF_AMDGPU_MACH from LLVM's ELF.h; feature support
/// from AMDGPUUsage's processor table).
pub const PROCESSORS: &[Processor] = &[
    p!("gfx600", 0x20, false, false),
    p!("gfx601", 0x21, false, false),
    p!("gfx700", 0x22, false, false),
    p!("gfx701", 0x23, false, false),
    p!("gfx702", 0x24, false, false),
    p!("gfx703", 0x25, false, false),
    p!("gfx704", 0x26, false, false),
    p!("gfx801", 0x28, true, false),
    p!("gfx802", 0x29, false, false),
    p!("gfx803", 0x2a, false, false),
    p!("gfx810", 0x2b, true, false),
    p!("gfx900", 0x2c, true, false),
    p!("gfx902", 0x2d, true, false),
    p!("gfx904", 0x2e, true, false),
    p!("gfx906", 0x2f, true, true),
    p!("gfx908", 0x30, true, true),
    p!("gfx909", 0x31, true, false),
    p!("gfx90c", 0x32, true, false),
    p!("gfx1010", 0x33, true, false),
    p!("gfx1011", 0x34, true, false),
    p!("gfx1012", 0x35, true, false),
    p!("gfx1030", 0x36, false, false),
    p!("gfx1031", 0x37, false, false),
    p!("gfx1032", 0x38, false, false),
    p!("gfx1033", 0x39, false, false),
    p!("gfx602", 0x3a, false, false),
    p!("gfx705", 0x3b, false, false),
    p!("gfx805", 0x3c, false, false),
    p!("gfx1035", 0x3d, false, false),
    p!("gfx1034", 0x3e, false, false),
    p!("gfx90a", 0x3f, true, true),
    p!("gfx940", 0x40, true, true),
    p!("gfx1100", 0x41, false, false),
    p!("gfx1013", 0x42, true, false),
    p!("gfx1150", 0x43, false, false),
    p!("gfx1103", 0x44, false, false),
    p!("gfx1036", 0x45, false, false),
    p!("gfx1101", 0x46, false, false),
    p!("gfx1102", 0x47, false, false),
    p!("gfx1200", 0x48, false, false),
    p!("gfx1250", 0x49, false, false),
    p!("gfx1151", 0x4a, false, false),
    p!("gfx941", 0x4b, true, true),
    p!("gfx942", 0x4c, true, true),
    p!("gfx1201", 0x4e, false, false),
    p!("gfx950", 0x4f, true, true),
    p!("gfx9-generic", 0x51, true, false),
    p!("gfx10-1-generic", 0x52, true, false),
    p!("gfx10-3-generic", 0x53, false, false),
    p!("gfx11-generic", 0x54, false, false),
    p!("gfx1152", 0x55, false, false),
    p!("gfx1153", 0x58, false, false),
    p!("gfx12-generic", 0x59, false, false),
    p!("gfx9-4-generic", 0x5f, true, true),
];

/// The processor with this `EF_AMDGPU_MACH` value.
pub fn processor_by_mach(mach: u32) -> Option<&'static Processor> {
    PROCESSORS.iter().find(|p| p.mach == mach)
}

pub fn processor_by_name(name: &str) -> Option<&'static Processor> {
    PROCESSORS.iter().find(|p| p.name == name)
}

/// Generic targets and the processors their code runs on (AMDGPUUsage,
/// "AMDGPU Generic Processors").
pub const GENERIC_TARGETS: &[(&str, &[&str])] = &[
    (
        "gfx9-generic",
        &["gfx900", "gfx902", "gfx904", "gfx906", "gfx909", "gfx90c"],
    ),
    ("gfx9-4-generic", &["gfx940", "gfx941", "gfx942", "gfx950"]),
    (
        "gfx10-1-generic",
        &["gfx1010", "gfx1011", "gfx1012", "gfx1013"],
    ),
    (
        "gfx10-3-generic",
        &[
            "gfx1030", "gfx1031", "gfx1032", "gfx1033", "gfx1034", "gfx1035", "gfx1036",
        ],
    ),
    (
        "gfx11-generic",
        &[
            "gfx1100", "gfx1101", "gfx1102", "gfx1103", "gfx1150", "gfx1151", "gfx1152", "gfx1153",
        ],
    ),
    ("gfx12-generic", &["gfx1200", "gfx1201"]),
];

/// The member processors of a generic target, or `None` if `generic` is not one.
pub fn generic_members(generic: &str) -> Option<&'static [&'static str]> {
    GENERIC_TARGETS
        .iter()
        .find(|(g, _)| *g == generic)
        .map(|(_, m)| *m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonicalises_feature_order() {
        let t = TargetId::parse("gfx90a:xnack-:sramecc+").unwrap();
        assert_eq!(t.to_string(), "gfx90a:sramecc+:xnack-");
        assert_eq!(t.feature("xnack"), Some(false));
        assert_eq!(t.feature("sramecc"), Some(true));
        assert_eq!(t, "gfx90a:sramecc+:xnack-".parse().unwrap());
        assert_eq!(TargetId::parse("gfx1030").unwrap().features(), &[]);
    }

    #[test]
    fn generic_targets_parse() {
        let t = TargetId::parse("gfx10-3-generic").unwrap();
        assert!(t.is_generic());
        assert_eq!(generic_members("gfx10-3-generic").unwrap().len(), 7);
        assert!(generic_members("gfx1030").is_none());
    }

    #[test]
    fn rejects_garbage() {
        for bad in [
            "",
            "gfx",
            "sm_80",
            "gfx90a:",
            "gfx90a:xnack",
            "gfx90a:xnack+:xnack-",
            "gfx9-foo",
            "gfx90g",
            "gfx90a:+",
        ] {
            assert!(TargetId::parse(bad).is_err(), "{bad} parsed");
        }
    }

    #[test]
    fn versions_decode_as_kfd_reports_them() {
        let cases = [
            (90010, "gfx90a"),
            (90402, "gfx942"),
            (100300, "gfx1030"),
            (110501, "gfx1151"),
            (120001, "gfx1201"),
            (90012, "gfx90c"),
            (80003, "gfx803"),
        ];
        for (v, name) in cases {
            assert_eq!(processor_from_version(v).as_deref(), Some(name));
            let (a, b, c) = version_of(name).unwrap();
            assert_eq!(a * 10000 + b * 100 + c, v);
        }
        assert_eq!(processor_from_version(0), None);
        assert_eq!(override_value("gfx1030").as_deref(), Some("10.3.0"));
        assert_eq!(override_value("gfx90a").as_deref(), Some("9.0.10"));
        assert_eq!(override_value("gfx11-generic"), None);
    }

    #[test]
    fn mach_table_is_consistent() {
        for p in PROCESSORS {
            assert_eq!(processor_by_mach(p.mach), Some(p), "{}", p.name);
            assert!(TargetId::parse(p.name).is_ok(), "{}", p.name);
        }
        assert_eq!(processor_by_mach(0x3f).unwrap().name, "gfx90a");
        assert_eq!(processor_by_mach(0x4c).unwrap().name, "gfx942");
        for (g, members) in GENERIC_TARGETS {
            assert!(processor_by_name(g).is_some());
            for m in *members {
                assert!(processor_by_name(m).is_some(), "{m}");
            }
        }
    }
}
