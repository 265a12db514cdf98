//! Backtraces of crashing tests: a test that died of a signal, in a gtest
//! step with `backtrace:`, runs again alone (`--gtest_filter`) under gdb in
//! the same container, and its backtrace goes beside its error, at the end
//! of the test's output (`backtrace (gdb):`, which signatures leave out of
//! a failure's text so that it groups with the same crash without frames).

use super::{Case, CaseVerdict, TestSuiteContext};
use crate::debugger::gdb;
use crate::debugger::gdb_output::{self, HEADING};
use crate::matrix_file::BacktraceSpec;

/// At most this many crashing tests of one binary are run again.
const MAX_RERUNS: usize = 5;

/// Signals that make a test a crash worth a backtrace.
fn is_crash(kind: &str) -> bool {
    matches!(
        kind,
        "SIGSEGV" | "SIGABRT" | "SIGBUS" | "SIGILL" | "SIGFPE" | "SIGTRAP"
    )
}

/// Runs each crashed test of `bin` among `cases` again under gdb and adds
/// its top frames to its output; problems become a line there, never an
/// error of the step.
pub async fn add(cx: &TestSuiteContext<'_>, spec: &BacktraceSpec, bin: &str, cases: &mut [Case]) {
    let mut reruns = 0;
    for (i, c) in cases.iter_mut().enumerate() {
        let CaseVerdict::Error { kind, .. } = &c.verdict else {
            continue;
        };
        if !is_crash(kind) {
            continue;
        }
        if reruns == MAX_RERUNS {
            c.output.push_str(&format!(
                "\n\n{HEADING}\nnot taken: only the first {MAX_RERUNS} crashing tests of a binary are run again\n"
            ));
            continue;
        }
        reruns += 1;
        let filter = format!("{}.{}", c.suite, c.name);
        let base = format!("{}/{}-gtest-{i}", crate::debugger::DIR, cx.slug);
        let (gdb_file, out) = (format!("{base}.gdb"), format!("{base}.txt"));
        // The test runs with its step's variables and those of its GPU shard.
        let vars: Vec<String> = cx
            .env
            .iter()
            .chain(cx.per_gpu.get(c.shard).into_iter().flatten())
            .cloned()
            .collect();
        let script = format!(
            "mkdir -p {dir}\n\
             command -v gdb >/dev/null || {{ echo '{not_rerun} {missing}'; exit 0; }}\n\
             set -- \"$0\" \"--gtest_filter=$1\"\n\
             {rerun}cat {out}",
            dir = crate::debugger::DIR,
            not_rerun = gdb_output::NOT_RERUN,
            missing = gdb::MISSING,
            rerun = gdb::rerun(spec, &gdb_file, &out),
        );
        let mut bytes = Vec::new();
        let ran = cx
            .engine
            .exec(
                cx.container,
                ["bash", "-c", &script, bin, &filter]
                    .map(String::from)
                    .to_vec(),
                vars,
                &mut |b: &[u8]| bytes.extend_from_slice(b),
                Some(spec.timeout + std::time::Duration::from_secs(30)),
            )
            .await;
        let text = match ran {
            Ok(_) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(e) => format!("{} running gdb failed: {e}", gdb_output::NOT_RERUN),
        };
        // JUnit readers keep the head of a test's output: the frames must
        // fit after what the test printed.
        if c.output.len() > 4096 {
            let cut = super::tail_start(&c.output, 4096);
            c.output = format!("… {}", &c.output[cut..]);
        }
        let bt = gdb_output::parse(
            &format!("{bin} --gtest_filter={filter}"),
            &text,
            &spec.breaks,
            spec.frames,
            &out,
        );
        c.output.push_str(&format!(
            "\n\n{HEADING}\n{}\n",
            bt.top(crate::store::record::TOP_FRAMES).join("\n")
        ));
    }
}
