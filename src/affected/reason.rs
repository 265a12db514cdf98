//! Why a cell is affected, in the words `plan` prints.

/// One reason a cell is affected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    /// Its environment installed the package (asked for by the matrix, or
    /// pulled in as a dependency).
    Installs {
        package: String,
        version: String,
        source: String,
        asked: bool,
    },
    /// It builds from the `sources:` entry: in its own checkout, or in the
    /// build stage it starts from.
    BuildsFrom {
        source: String,
        commit: Option<String>,
        build: Option<String>,
    },
    /// It uses the file.
    Uses { file: String, how: String },
    /// Its autopkgtests installed the package when they ran (their
    /// `Depends:`, which no lock lists: `crate::store::test_installs`).
    TestInstalls {
        package: String,
        version: String,
        source: String,
    },
    /// An `autopkgtest:` step of it runs the source package's own tests
    /// (which install what they need when they run: no lock lists it).
    Tests { source: String, step: String },
    /// No lock says what its environment installed.
    Undescribed { why: String },
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reason::Installs {
                package,
                version,
                source,
                asked,
            } => {
                let how = if *asked {
                    "asked for"
                } else {
                    "as a dependency"
                };
                write!(f, "installs {package} {version} ")?;
                // A package that is its own source says nothing more.
                if package.split(':').next() != Some(source.as_str()) {
                    write!(f, "(src:{source}) ")?;
                }
                write!(f, "{how}")
            }
            Reason::BuildsFrom {
                source,
                commit,
                build,
            } => {
                write!(f, "builds from source:{source}")?;
                if let Some(c) = commit {
                    write!(f, " at {}", &c[..c.len().min(12)])?;
                }
                if let Some(b) = build {
                    write!(f, " in build {b}")?;
                }
                Ok(())
            }
            Reason::Uses { file, how } => write!(f, "uses file:{file} ({how})"),
            Reason::TestInstalls {
                package,
                version,
                source,
            } => {
                write!(f, "its autopkgtests installed {package} {version} ")?;
                if package.split(':').next() != Some(source.as_str()) {
                    write!(f, "(src:{source}) ")?;
                }
                write!(f, "when they ran")
            }
            Reason::Tests { source, step } => {
                write!(f, "runs the autopkgtests of src:{source} (step {step})")
            }
            Reason::Undescribed { why } => write!(f, "no lock describes it: {why}"),
        }
    }
}
