//! A builder for `rocmatrix` invocations.
//!
//! ```ignore
//! let ran = Rocmatrix::run_matrix(&m).out(dir.path()).args(["--jobs", "3"]).run();
//! ran.assert_code(1);
//! let run = ran.run_store();
//! ```
//!
//! Every invocation carries this test run's label in `ROCMATRIX_LABEL` (after
//! whatever the caller's environment has there), so all rocmatrix makes in
//! the engine can be told apart from a user's and removed afterwards.

use std::ffi::OsStr;
use std::io::Write;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use super::label;

pub struct Rocmatrix {
    cmd: Command,
    shown: Vec<String>,
    out: Option<PathBuf>,
}

impl Default for Rocmatrix {
    fn default() -> Self {
        Self::new()
    }
}

impl Rocmatrix {
    /// `rocmatrix` with this test run's label.
    pub fn new() -> Self {
        Self::of(Command::new(env!("CARGO_BIN_EXE_rocmatrix")))
    }

    /// `rocmatrix` on a host of another name: in a UTS namespace of its
    /// own (`unshare -u`) whose host name is `name`.
    pub fn on_host(name: &str) -> Self {
        let mut cmd = Command::new("unshare");
        cmd.args([
            "-u",
            "sh",
            "-c",
            "hostname \"$1\" && shift && exec \"$@\"",
            "sh",
        ])
        .arg(name)
        .arg(env!("CARGO_BIN_EXE_rocmatrix"));
        Self::of(cmd)
    }

    fn of(mut cmd: Command) -> Self {
        let labels = match std::env::var("ROCMATRIX_LABEL") {
            Ok(theirs) if !theirs.trim().is_empty() => format!("{theirs},{}", label::label()),
            _ => label::label(),
        };
        cmd.env("ROCMATRIX_LABEL", labels);
        // Each invocation its own record of run roots and held images:
        // other tests' runs must not keep this test's prune from removing
        // its images (`.env("ROCMATRIX_STATE", …)` shares one on purpose).
        cmd.env("ROCMATRIX_STATE", fresh_state_dir());
        Rocmatrix {
            cmd,
            shown: vec!["rocmatrix".into()],
            out: None,
        }
    }

    /// `rocmatrix run MATRIX`.
    pub fn run_matrix(matrix: impl AsRef<OsStr>) -> Self {
        Self::new().arg("run").arg(matrix)
    }

    /// Without the test-run label, as a user runs it. For reading only
    /// (`images` lists just the labelled images when a label is given):
    /// what an unlabelled invocation makes, the cleanup cannot find.
    pub fn unlabelled(mut self) -> Self {
        self.cmd.env_remove("ROCMATRIX_LABEL");
        self
    }

    pub fn arg(mut self, a: impl AsRef<OsStr>) -> Self {
        self.shown.push(a.as_ref().to_string_lossy().into_owned());
        self.cmd.arg(a);
        self
    }

    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        for a in args {
            self = self.arg(a);
        }
        self
    }

    /// `--out DIR`; [`Ran::run_store`] then finds the run in it.
    pub fn out(mut self, dir: impl AsRef<Path>) -> Self {
        self.out = Some(dir.as_ref().to_path_buf());
        self.arg("--out").arg(dir.as_ref())
    }

    /// `--progress plain`: one line per event, no bars.
    pub fn progress_plain(self) -> Self {
        self.args(["--progress", "plain"])
    }

    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.cmd.env(key, value);
        self
    }

    pub fn current_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.cmd.current_dir(dir);
        self
    }

    /// Runs it to the end with no input.
    pub fn run(mut self) -> Ran {
        let output = self
            .cmd
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("{}: {e}", self.shown.join(" ")));
        Ran {
            output,
            shown: self.shown.join(" "),
            out: self.out,
        }
    }

    /// Runs it to the end with `input` on its standard input.
    pub fn run_with_input(mut self, input: &str) -> Ran {
        let mut child = self
            .cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}", self.shown.join(" ")));
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        Ran {
            output: child.wait_with_output().unwrap(),
            shown: self.shown.join(" "),
            out: self.out,
        }
    }

    /// Starts it with piped output (to be signalled, waited for).
    pub fn spawn(mut self) -> Child {
        self.cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}", self.shown.join(" ")))
    }
}

/// A finished `rocmatrix` invocation. Derefs to its [`Output`].
pub struct Ran {
    pub output: Output,
    shown: String,
    out: Option<PathBuf>,
}

impl Deref for Ran {
    type Target = Output;
    fn deref(&self) -> &Output {
        &self.output
    }
}

impl Ran {
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }

    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }

    /// stdout then stderr.
    pub fn text(&self) -> String {
        self.stdout() + &self.stderr()
    }

    /// The exit code; -1 when a signal ended it.
    pub fn code(&self) -> i32 {
        self.output.status.code().unwrap_or(-1)
    }

    /// The command, its exit status and both outputs: for assertion messages.
    pub fn context(&self) -> String {
        format!(
            "`{}` exited with {}\n--- stdout\n{}--- stderr\n{}",
            self.shown,
            self.output.status,
            self.stdout(),
            self.stderr()
        )
    }

    #[track_caller]
    pub fn assert_success(&self) -> &Self {
        assert!(self.output.status.success(), "{}", self.context());
        self
    }

    #[track_caller]
    pub fn assert_code(&self, code: i32) -> &Self {
        assert_eq!(self.code(), code, "{}", self.context());
        self
    }

    /// The run directory under `--out` that this invocation made: the one
    /// its `run store:` line names, else the newest by name. (Run ids
    /// made in one second do not sort by time: two shards run one after
    /// the other may sort either way.)
    #[track_caller]
    pub fn run_store(&self) -> PathBuf {
        let out = self
            .out
            .as_ref()
            .unwrap_or_else(|| panic!("`{}` has no --out", self.shown));
        let named = self
            .stdout()
            .lines()
            .filter_map(|l| l.strip_prefix("run store: "))
            .filter_map(|p| {
                std::path::Path::new(p.trim())
                    .file_name()
                    .map(|n| n.to_owned())
            })
            .map(|id| out.join("runs").join(id))
            .find(|dir| dir.is_dir());
        named.unwrap_or_else(|| super::run_dir(out))
    }
}

/// A directory no other invocation uses, under this test process's own.
fn fresh_state_dir() -> PathBuf {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    std::env::temp_dir()
        .join(format!("rocmatrix-test-state-{}", std::process::id()))
        .join(n.to_string())
}

/// `rocmatrix run MATRIX EXTRA… --out DIR/NAME` with plain progress: how
/// it ended and its run store.
pub fn run_into(dir: &Path, matrix: &Path, name: &str, extra: &[&str]) -> (Ran, PathBuf) {
    let o = Rocmatrix::run_matrix(matrix)
        .progress_plain()
        .out(dir.join(name))
        .args(extra)
        .run();
    let run = o.run_store();
    (o, run)
}
