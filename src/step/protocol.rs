//! How a step is run and how its end is told, in one place: the command of
//! a step by exec ([`step_command`]), its script files, and the runner's
//! bash protocol — the main process that runs a cell's leading steps
//! ([`runner_command`]), built here, and the marker lines it writes
//! between them (`<nonce> B <index>`, `<nonce> E <index> <exit> <oom
//! kills> <ms>`, `<nonce> H <index> <exit>`), parsed here
//! ([`MarkerScanner`]).

use memchr::memmem;

use crate::plan::Step;

/// Exit code a step uses to say "skipped" (as Debian's ROCm test launcher does).
pub const EXIT_SKIPPED: i64 = 77;

/// Longest step script passed to bash as an argument: Linux takes at most
/// 128 KiB in one argument (`MAX_ARG_STRLEN`, its terminating NUL included).
const INLINE_SCRIPT_MAX: usize = 128 * 1024 - 1;

/// Where the runner copies JUnit files.
pub const JUNIT_STAGING: &str = "/rocmatrix/junit";

/// The runner's command line: runs the CDI hook stand-ins `hooks` (shell
/// commands), then `steps` (index into the cell's steps, the step) in
/// order, then idles. It never ends by itself: Docker may drop the last
/// output of a main process that exits at once (a step's last line, its end
/// marker), and the steps after a test suite need it running.
pub fn runner_command(nonce: &str, hooks: &[String], steps: &[(usize, &Step)]) -> Vec<String> {
    let mut script = String::from(
        "M=$1; s=0\n\
         oom() { local n; n=$(sed -n 's/^oom_kill //p' /sys/fs/cgroup/memory.events 2>/dev/null); \
         [ -n \"$n\" ] || n=$(sed -n 's/^oom_kill //p' /sys/fs/cgroup/memory/memory.oom_control 2>/dev/null); \
         echo \"${n:-0}\"; }\n",
    );
    let mut args = vec![
        "bash".to_string(),
        "-c".into(),
        String::new(),
        "rocmatrix-runner".into(),
        nonce.to_string(),
    ];
    // Like the steps' scripts, each hook is a positional argument.
    for (index, hook) in hooks.iter().enumerate() {
        args.push(hook.clone());
        script.push_str(&format!(
            "sh -c -- \"${{{}}}\" 2>&1; printf '%s H {index} %s\\n' \"$M\" \"$?\"\n",
            args.len() - 4
        ));
    }
    script.push_str("steps() {\n");
    for (index, step) in steps {
        let path = format!("/rocmatrix/steps/{}.sh", step_slug(*index, &step.name));
        // The script itself is a positional argument of the runner, never
        // part of the runner's own text; one too long for an argument was
        // uploaded (as for an exec, see `cell::step_command`).
        let cmd = if passed_inline(&step.run) {
            args.push(step.run.clone());
            format!(
                "bash -eo pipefail -c -- \"${{{}}}\" {}",
                args.len() - 4,
                crate::plan::ci::shell_quote(&path)
            )
        } else {
            format!("bash -eo pipefail {}", crate::plan::ci::shell_quote(&path))
        };
        // The step's own clock ($EPOCHREALTIME, bash 5; `-` without it):
        // its end marker says how long it ran, so a kill that came late
        // (a stuck engine held its output back) does not make it a timeout.
        script.push_str(&format!(
            "printf '%s B {index}\\n' \"$M\"\n\
             t=${{EPOCHREALTIME/[.,]/}}\n\
             ROCMATRIX_STEP={name} {cmd} 2>&1; rc=$?; o=$(oom)\n\
             if [ -n \"$t\" ]; then ms=$(( (${{EPOCHREALTIME/[.,]/}} - t) / 1000 )); else ms=-; fi\n",
            name = crate::plan::ci::shell_quote(&step.name),
        ));
        if !step.junit.is_empty() {
            script.push_str(&stage_junit(*index, &step.junit));
        }
        script.push_str(&format!(
            "printf '%s E {index} %s %s %s\\n' \"$M\" \"$rc\" \"$o\" \"$ms\"\n"
        ));
        // Where the controller would judge the cell stopped, so does the
        // runner (see `cell::stops_the_cell`).
        let stop_if = if step.continue_on_error {
            format!("[ $rc = {EXIT_SKIPPED} ] || {{ [ $rc = 137 ] && [ \"$o\" -gt \"$s\" ]; }}")
        } else {
            "[ $rc != 0 ]".to_string()
        };
        script.push_str(&format!("if {stop_if}; then return; fi; s=$o\n"));
    }
    script.push_str(":\n}\nsteps \"$@\"\nexec sleep infinity\n");
    args[2] = script;
    args
}

/// Shell copying what `globs` match to the staging directory of step
/// `index`, listing the matches NUL-separated; relative matches are under
/// `/work`, as when the files are collected by exec.
fn stage_junit(index: usize, globs: &[String]) -> String {
    let dir = format!("{JUNIT_STAGING}/{index:02}");
    format!(
        "( shopt -s nullglob globstar; mkdir -p {dir}; : > {dir}.list; \
         for f in {globs}; do if [ -e \"$f\" ] || [ -L \"$f\" ]; then \
         case $f in /*) a=$f;; *) a=/work/$f;; esac; printf '%s\\0' \"$a\" >> {dir}.list; \
         cp -a --parents -- \"$a\" {dir}/; fi; done ) >/dev/null 2>&1\n",
        globs = globs.join(" ")
    )
}

/// A marker the runner wrote between steps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Marker {
    /// Step `index` begins.
    Began(usize),
    /// Step `index` exited with `code`; the cgroup had counted `oom_kills`.
    Ended {
        index: usize,
        code: i64,
        oom_kills: u64,
        /// How long the step ran by its own clock, when the shell knew.
        elapsed_ms: Option<u64>,
    },
    /// Hook stand-in `index` exited with `code`.
    Hook { index: usize, code: i64 },
}

/// What the stream holds next: a step's output or a marker.
#[derive(Debug, PartialEq, Eq)]
pub enum Piece {
    Output(Vec<u8>),
    Marker(Marker),
}

/// Splits the runner's output into step output and markers, whatever the
/// chunk boundaries.
pub struct MarkerScanner {
    prefix: Vec<u8>,
    pending: Vec<u8>,
}

impl MarkerScanner {
    pub fn new(nonce: &str) -> MarkerScanner {
        MarkerScanner {
            prefix: format!("{nonce} ").into_bytes(),
            pending: Vec::new(),
        }
    }

    /// Feeds a chunk; returns the pieces it completes, in order.
    pub fn feed(&mut self, chunk: &[u8]) -> Vec<Piece> {
        self.pending.extend_from_slice(chunk);
        let mut pieces = Vec::new();
        loop {
            match memmem::find(&self.pending, &self.prefix) {
                Some(at) => {
                    let Some(nl) = memchr::memchr(b'\n', &self.pending[at..]) else {
                        if at > 0 {
                            pieces.push(Piece::Output(self.pending.drain(..at).collect()));
                        }
                        break;
                    };
                    if at > 0 {
                        pieces.push(Piece::Output(self.pending[..at].to_vec()));
                    }
                    let line = &self.pending[at + self.prefix.len()..at + nl];
                    if let Some(m) = parse_marker(line) {
                        pieces.push(Piece::Marker(m));
                    }
                    self.pending.drain(..at + nl + 1);
                }
                None => {
                    // Hold back only a tail that could begin a marker.
                    let longest = self.prefix.len().saturating_sub(1).min(self.pending.len());
                    let keep = (1..=longest)
                        .rev()
                        .find(|k| self.pending.ends_with(&self.prefix[..*k]))
                        .unwrap_or(0);
                    let cut = self.pending.len() - keep;
                    if cut > 0 {
                        pieces.push(Piece::Output(self.pending.drain(..cut).collect()));
                    }
                    break;
                }
            }
        }
        pieces
    }

    /// What is left when the stream ends.
    pub fn finish(&mut self) -> Option<Vec<u8>> {
        (!self.pending.is_empty()).then(|| std::mem::take(&mut self.pending))
    }
}

fn parse_marker(line: &[u8]) -> Option<Marker> {
    let text = std::str::from_utf8(line).ok()?;
    let mut words = text.split(' ');
    match words.next()? {
        "B" => Some(Marker::Began(words.next()?.parse().ok()?)),
        "E" => Some(Marker::Ended {
            index: words.next()?.parse().ok()?,
            code: words.next()?.parse().ok()?,
            oom_kills: words.next()?.trim().parse().unwrap_or(0),
            elapsed_ms: words.next().and_then(|w| w.trim().parse().ok()),
        }),
        "H" => Some(Marker::Hook {
            index: words.next()?.parse().ok()?,
            code: words.next()?.trim().parse().ok()?,
        }),
        _ => None,
    }
}

/// A fresh random nonce (128 bits, hex), for one container's markers.
pub fn nonce() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut out = String::from("rocmatrix-");
    for _ in 0..2 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0),
        );
        out.push_str(&format!("{:016x}", h.finish()));
    }
    out
}

/// `NN-name` for step files: sortable and file-system safe.
pub fn step_slug(index: usize, name: &str) -> String {
    format!(
        "{:02}-{}",
        index + 1,
        crate::matrix_file::cell_id::sanitize(name)
    )
}

pub fn env_key(k: &str) -> String {
    k.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect()
}

/// Whether a step's script goes to bash as an argument rather than as an
/// uploaded file: when it fits in one argument and holds no NUL (which no
/// argument can).
pub(crate) fn passed_inline(run: &str) -> bool {
    run.len() <= INLINE_SCRIPT_MAX && !run.contains('\0')
}

/// The command that runs a step's script: `bash -eo pipefail -c -- SCRIPT`,
/// or the uploaded file for a script too long for that. Either way `$0` is
/// `/rocmatrix/steps/<slug>.sh`, so bash's messages name the step alike.
/// (`--`: a script that starts with `-` is a script, not bash's options.)
pub(crate) fn step_command(slug: &str, run: &str) -> Vec<String> {
    let path = format!("/rocmatrix/steps/{slug}.sh");
    let mut cmd = vec!["bash".to_string(), "-eo".into(), "pipefail".into()];
    if passed_inline(run) {
        cmd.extend(["-c".to_string(), "--".into(), run.to_string()]);
    }
    cmd.push(path);
    cmd
}

/// Every step's script as `rocmatrix/steps/<slug>.sh` in a tar archive (for
/// `shell`, which runs them from files).
pub fn scripts_tar(steps: &[Step]) -> std::io::Result<Vec<u8>> {
    scripts_tar_where(steps, |_| true)
}

/// [`scripts_tar`] of the steps that `keep` selects, at their own slugs.
pub(crate) fn scripts_tar_where(
    steps: &[Step],
    keep: impl Fn(&Step) -> bool,
) -> std::io::Result<Vec<u8>> {
    let mut b = tar::Builder::new(Vec::new());
    for (i, s) in steps.iter().enumerate().filter(|(_, s)| keep(s)) {
        let mut h = tar::Header::new_gnu();
        h.set_size(s.run.len() as u64);
        h.set_mode(0o755);
        h.set_cksum();
        b.append_data(
            &mut h,
            format!("rocmatrix/steps/{}.sh", step_slug(i, &s.name)),
            s.run.as_bytes(),
        )?;
    }
    b.into_inner()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Starts the runner `args` describe, its stdout piped.
    fn spawn_runner(args: &[String]) -> (std::process::Child, std::process::ChildStdout) {
        let mut child = std::process::Command::new(&args[0])
            .args(&args[1..])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        (child, out)
    }

    /// Reads `out` into `text` until it holds `marker`.
    fn read_until(out: &mut impl std::io::Read, text: &mut String, marker: &str) {
        let mut buf = [0u8; 4096];
        while !text.contains(marker) {
            let got = out.read(&mut buf).unwrap();
            assert!(got > 0, "{text}");
            text.push_str(&String::from_utf8_lossy(&buf[..got]));
        }
    }

    #[test]
    fn markers_split_output_across_any_chunk_boundary() {
        let n = "rocmatrix-abc";
        let stream = format!("{n} B 0\nhello\nno newline{n} E 0 3 0 1520\n{n} B 1\nx{n} E 1 0 2\n");
        let bytes = stream.as_bytes();
        for size in 1..bytes.len() {
            let mut s = MarkerScanner::new(n);
            let mut out = Vec::new();
            for chunk in bytes.chunks(size) {
                out.extend(s.feed(chunk));
            }
            assert_eq!(s.finish(), None);
            // Merge adjacent outputs (chunking splits them).
            let mut merged: Vec<Piece> = Vec::new();
            for p in out {
                match (merged.last_mut(), p) {
                    (Some(Piece::Output(a)), Piece::Output(b)) => a.extend(b),
                    (_, p) => merged.push(p),
                }
            }
            assert_eq!(
                merged,
                vec![
                    Piece::Marker(Marker::Began(0)),
                    Piece::Output(b"hello\nno newline".to_vec()),
                    Piece::Marker(Marker::Ended {
                        index: 0,
                        code: 3,
                        oom_kills: 0,
                        elapsed_ms: Some(1520),
                    }),
                    Piece::Marker(Marker::Began(1)),
                    Piece::Output(b"x".to_vec()),
                    Piece::Marker(Marker::Ended {
                        index: 1,
                        code: 0,
                        oom_kills: 2,
                        elapsed_ms: None,
                    }),
                ],
                "chunks of {size}"
            );
        }
    }

    #[test]
    fn output_that_only_resembles_a_marker_stays_output() {
        let mut s = MarkerScanner::new("rocmatrix-abc");
        let mut out = s.feed(b"rocmatrix-ab B 0\nrocmatrix-abc");
        out.extend(s.finish().map(Piece::Output));
        let text: Vec<u8> = out
            .into_iter()
            .flat_map(|p| match p {
                Piece::Output(b) => b,
                Piece::Marker(m) => panic!("{m:?}"),
            })
            .collect();
        assert_eq!(text, b"rocmatrix-ab B 0\nrocmatrix-abc");
    }

    #[test]
    fn output_is_held_back_only_where_a_marker_could_begin() {
        let mut s = MarkerScanner::new("rocmatrix-abc");
        assert_eq!(
            s.feed(b"sleeping\n"),
            vec![Piece::Output(b"sleeping\n".to_vec())]
        );
        assert_eq!(s.feed(b"x rocm"), vec![Piece::Output(b"x ".to_vec())]);
        assert_eq!(s.finish(), Some(b"rocm".to_vec()));
    }

    /// The runner's own script through real bash: each step runs with its
    /// script, its output and exit code between its markers; a failing step
    /// without `continue_on_error` stops it; then it idles.
    #[test]
    fn the_runner_runs_each_step_between_its_markers_and_stops_where_the_cell_would() {
        use std::io::Read;
        let step = |name: &str, run: &str, continue_on_error: bool| Step {
            name: name.into(),
            run: run.into(),
            suite: None,
            timeout: std::time::Duration::from_secs(5),
            junit: Vec::new(),
            gpu: crate::matrix_file::GpuUse::None,
            continue_on_error,
            backtrace: None,
            rerun_failures: 0,
        };
        let steps = [
            step("one", "echo \"one $0\"; exit 3", true),
            step("two", "echo two >&2; false; echo unreached", false),
            step("three", "echo three", false),
        ];
        let listed: Vec<(usize, &Step)> = steps.iter().enumerate().collect();
        let n = "rocmatrix-0123";
        let args = runner_command(n, &[], &listed);
        let (mut child, mut out) = spawn_runner(&args);
        let mut text = String::new();
        // Until the runner idles: the second step's end marker.
        read_until(&mut out, &mut text, &format!("{n} E 1 "));
        std::thread::sleep(std::time::Duration::from_millis(200));
        let still_running = child.try_wait().unwrap().is_none();
        let _ = child.kill();
        let _ = child.wait();
        let _ = out.read_to_string(&mut text);
        // The OOM-kill count is this host's cgroup's, whatever it is; the
        // step's own time (milliseconds, by bash's clock) whatever it was.
        let text = regex::Regex::new(r"(E \d+ \d+) \d+ \d+\n")
            .unwrap()
            .replace_all(&text, "$1 K T\n");
        assert_eq!(
            text,
            format!(
                "{n} B 0\none /rocmatrix/steps/01-one.sh\n{n} E 0 3 K T\n\
                 {n} B 1\ntwo\n{n} E 1 1 K T\n"
            )
        );
        assert!(still_running, "the runner idles instead of exiting");
    }

    /// Hook stand-ins come first, each with its output and a marker for its
    /// exit code; a failing one does not stop the steps.
    #[test]
    fn the_runner_runs_hook_stand_ins_before_the_steps() {
        let step = Step {
            name: "one".into(),
            run: "echo step".into(),
            suite: None,
            timeout: std::time::Duration::from_secs(5),
            junit: Vec::new(),
            gpu: crate::matrix_file::GpuUse::None,
            continue_on_error: false,
            backtrace: None,
            rerun_failures: 0,
        };
        let n = "rocmatrix-0123";
        let hooks = [
            "echo \"it's linked\"".to_string(),
            "echo bad >&2; exit 4".into(),
        ];
        let args = runner_command(n, &hooks, &[(0, &step)]);
        let (mut child, mut out) = spawn_runner(&args);
        let mut text = String::new();
        read_until(&mut out, &mut text, &format!("{n} E 0 "));
        let _ = child.kill();
        let _ = child.wait();
        let text = text.split(&format!("{n} E 0 ")).next().unwrap();
        assert_eq!(
            text,
            format!("it's linked\n{n} H 0 0\nbad\n{n} H 1 4\n{n} B 0\nstep\n")
        );
        let mut scanner = MarkerScanner::new(n);
        assert_eq!(
            scanner.feed(format!("{n} H 1 4\n").as_bytes()),
            vec![Piece::Marker(Marker::Hook { index: 1, code: 4 })]
        );
    }

    #[test]
    fn nonces_differ() {
        assert_ne!(nonce(), nonce());
        assert_eq!(nonce().len(), "rocmatrix-".len() + 32);
    }

    #[test]
    fn quoting_survives_the_shell() {
        for w in ["plain", "it's", "a b", "", "$(x)", "\"q\""] {
            let out = std::process::Command::new("bash")
                .args([
                    "-c",
                    &format!("printf %s {}", crate::plan::ci::shell_quote(w)),
                ])
                .output()
                .unwrap();
            assert_eq!(String::from_utf8_lossy(&out.stdout), w);
        }
    }

    #[test]
    fn scripts_go_inline_unless_too_long_for_an_argument() {
        assert_eq!(
            step_command("01-a", "-x"),
            [
                "bash",
                "-eo",
                "pipefail",
                "-c",
                "--",
                "-x",
                "/rocmatrix/steps/01-a.sh"
            ]
        );
        let longest = "#".repeat(INLINE_SCRIPT_MAX);
        assert_eq!(step_command("01-a", &longest)[5], longest);
        let long = format!("{longest}\n");
        assert_eq!(
            step_command("02-b", &long),
            ["bash", "-eo", "pipefail", "/rocmatrix/steps/02-b.sh"]
        );
        assert_eq!(
            step_command("03-c", "echo \0")[3],
            "/rocmatrix/steps/03-c.sh"
        );
    }
}
