//! A hang's frames (`backtrace: {on: timeout}`): before a step (or a test)
//! past its timeout is killed, gdb attaches to each process of its tree in
//! the container (`gdb -batch -p PID`, `thread apply all bt`) and prints
//! every thread's frames.
//!
//! [`script`] is the bash the controller runs by exec: it finds the tree
//! (the processes whose environment names the step, `ROCMATRIX_STEP`, or
//! the pid a test process wrote, and their descendants, read from
//! `/proc`), leaves the shells out when there is a program to look at,
//! never attaches to a process in uninterruptible sleep (gdb would wait
//! with it) and gives each gdb what is left of its time budget (`timeout
//! -k`). [`parse`] reads its output into a [`Backtrace`] with the stuck
//! thread first; [`stuck_in`] names that thread's top frames for a hang's
//! signature. Nothing here kills: the caller kills at its deadline whatever
//! gdb did.

use super::gdb_output::{describe_frames, frame};
use crate::store::record::{Backtrace, Frame, Stop};

/// The mark the script's own lines start with.
pub const MARK: &str = "@@rocmatrix-hang@@";
/// At most this many processes of a tree get gdb.
const MAX_PROCESSES: usize = 8;
/// At most this much of one gdb's output is kept.
const MAX_GDB_OUTPUT: usize = 96 * 1024;

/// Which processes hung.
pub enum Tree<'a> {
    /// Those of the step of this name (its shell and everything it
    /// started carry `ROCMATRIX_STEP=<name>`), and their descendants.
    Step(&'a str),
    /// The process whose pid is in this file, and its descendants.
    Pidfile(&'a str),
}

/// The exec's command line: attach to `tree` within `budget_secs` in all,
/// `frames` frames per thread.
pub fn command(tree: &Tree<'_>, budget_secs: u64, frames: usize) -> Vec<String> {
    let sel = match tree {
        Tree::Step(name) => format!("env:{name}"),
        Tree::Pidfile(path) => format!("pidfile:{path}"),
    };
    vec![
        "bash".into(),
        "-c".into(),
        script(),
        "rocmatrix-hang".into(),
        sel,
        budget_secs.max(1).to_string(),
        frames.max(1).to_string(),
    ]
}

/// The bash that finds the tree and runs gdb on it (arguments: the
/// selection, the budget in seconds, the frame count).
fn script() -> String {
    format!(
        r#"sel=$1; budget=$2; frames=$3; M='{MARK}'; me=$$
end=$(( $(date +%s) + budget ))
cap=$(sed -n 's/^CapEff:[[:space:]]*//p' /proc/self/status)
sc=$(sed -n 's/^Seccomp:[[:space:]]*//p' /proc/self/status)
echo "$M ptrace cap=${{cap:-?}} seccomp=${{sc:-?}} yama=$(cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null || echo none)"
declare -A parent; roots=()
for d in /proc/[0-9]*; do
  p=${{d#/proc/}}; [ "$p" = "$me" ] && continue
  st=$(cat "$d/stat" 2>/dev/null) || continue
  rest=${{st##*) }}; read -r _ pp _ <<< "$rest"
  [ "$pp" = "$me" ] && continue
  parent[$p]=$pp
  case $sel in env:*)
    tr '\0' '\n' < "$d/environ" 2>/dev/null | grep -qxF "ROCMATRIX_STEP=${{sel#env:}}" && roots+=("$p");;
  esac
done
case $sel in pidfile:*) read -r r < "${{sel#pidfile:}}" 2>/dev/null && roots=("$r");; esac
tree=" ${{roots[*]}} "; grew=1
while [ $grew = 1 ]; do grew=0
  for p in "${{!parent[@]}}"; do
    case $tree in *" $p "*) continue;; esac
    case $tree in *" ${{parent[$p]}} "*) tree="$tree$p "; grew=1;; esac
  done
done
all=$(printf '%s\n' $tree | sort -n); progs=
for p in $all; do
  e=$(readlink "/proc/$p/exe" 2>/dev/null)
  case ${{e##*/}} in bash|sh|dash|timeout|'') ;; *) progs="$progs $p";; esac
done
[ -n "$progs" ] || progs=$all
[ -n "$progs" ] || {{ echo "$M none"; exit 0; }}
command -v gdb >/dev/null 2>&1 || nogdb=1
n=0
for p in $progs; do
  n=$((n + 1)); [ $n -le {MAX_PROCESSES} ] || {{ echo "$M more"; break; }}
  st=$(cat "/proc/$p/stat" 2>/dev/null) || continue
  rest=${{st##*) }}; read -r state _ <<< "$rest"
  echo "$M pid $p state $state comm $(cat /proc/$p/comm 2>/dev/null) exe $(readlink /proc/$p/exe 2>/dev/null)"
  [ -z "$nogdb" ] || continue
  if [ "$state" = D ]; then echo "$M kernel $(cat /proc/$p/wchan 2>/dev/null)"; continue; fi
  left=$(( end - $(date +%s) ))
  [ $left -ge 1 ] || {{ echo "$M late"; continue; }}
  timeout -k 2 $left gdb -batch -nx -p "$p" -ex 'set pagination off' -ex 'set width 0' \
    -ex 'set print frame-arguments none' -ex 'set print address off' \
    -ex 'set debuginfod enabled off' -ex "thread apply all bt $frames" </dev/null 2>&1 | head -c {MAX_GDB_OUTPUT}
  rc=${{PIPESTATUS[0]}}; echo; echo "$M gdb-exit $rc"
done
[ -z "$nogdb" ] || echo "$M no-gdb"
"#
    )
}

/// Runs [`command`] in `container` for `tree` under `spec`'s `timeout`
/// (gdb's budget) and `frames`: the script's output, or a line saying why
/// there is none. The exec is bounded too (the budget and a grace): a gdb
/// stuck beyond its own `timeout -k` never holds the caller past it.
pub async fn take(
    engine: &crate::engine::Engine,
    container: &str,
    tree: &Tree<'_>,
    spec: &crate::matrix_file::BacktraceSpec,
) -> String {
    let budget = spec.timeout.as_secs().max(1);
    let mut out = Vec::new();
    let ran = engine
        .exec(
            container,
            command(tree, budget, spec.frames),
            Vec::new(),
            &mut |b: &[u8]| {
                if out.len() < super::MAX_OUTPUT {
                    out.extend_from_slice(b)
                }
            },
            Some(std::time::Duration::from_secs(budget + 5)),
        )
        .await;
    let mut text = String::from_utf8_lossy(&out).into_owned();
    match ran {
        Ok(crate::engine::ExecOutcome::Exited(_)) => {}
        Ok(crate::engine::ExecOutcome::TimedOut) => {
            text.push_str(&format!("\n{MARK} cut off after {budget} s\n"))
        }
        Err(e) => text.push_str(&format!("\n{MARK} failed {e}\n")),
    }
    text
}

/// What the script saw of one process.
#[derive(Default)]
struct Proc {
    pid: String,
    comm: String,
    exe: String,
    /// `D`: in uninterruptible sleep, where gdb was not sent.
    kernel: Option<String>,
    /// gdb's own complaint (`ptrace: Operation not permitted.`).
    refused: Option<String>,
    /// gdb's exit status, when it ran (124, 137: timed out).
    gdb_exit: Option<i32>,
    stops: usize,
}

/// Reads the script's `output` into a backtrace: one stop per thread of
/// each process (the thread stuck in the program's own code first), or a
/// note saying why there are none. `artifact`: where the output is kept.
pub fn parse(output: &str, max_frames: usize, artifact: &str) -> Backtrace {
    let mut procs: Vec<Proc> = Vec::new();
    let mut stops: Vec<Stop> = Vec::new();
    let (mut caps, mut none, mut nogdb, mut more) = (String::new(), false, false, false);
    let mut failed = None;
    for line in output.lines() {
        let line = line.trim_end();
        if let Some(rest) = line.strip_prefix(MARK) {
            let rest = rest.trim();
            let (word, value) = rest.split_once(' ').unwrap_or((rest, ""));
            let cur = procs.last_mut();
            match (word, cur) {
                ("ptrace", _) => caps = value.to_string(),
                ("none", _) => none = true,
                ("no-gdb", _) => nogdb = true,
                ("more", _) => more = true,
                ("cut", Some(p)) if p.gdb_exit.is_none() => p.gdb_exit = Some(124),
                ("failed", _) => failed = Some(value.to_string()),
                ("pid", _) => procs.push(proc_line(value)),
                ("kernel", Some(p)) => p.kernel = Some(value.trim().to_string()),
                ("late", Some(p)) => p.gdb_exit = Some(124),
                ("gdb-exit", Some(p)) => p.gdb_exit = value.trim().parse().ok(),
                _ => {}
            }
            continue;
        }
        let Some(p) = procs.last_mut() else { continue };
        if let Some(header) = thread_header(line) {
            p.stops += 1;
            stops.push(Stop {
                at: format!("hang: pid {} ({}), {header}", p.pid, p.comm),
                frames: Vec::new(),
                truncated: false,
            });
        } else if line.starts_with("ptrace: ") || line.contains("Could not attach to process") {
            p.refused.get_or_insert_with(|| line.trim().to_string());
        } else if let (Some(f), Some(s)) = (frame(line), stops.last_mut()) {
            if s.frames.len() < max_frames {
                s.frames.push(f);
            } else {
                s.truncated = true;
            }
        } else if line.starts_with("(More stack frames follow") {
            if let Some(s) = stops.last_mut() {
                s.truncated = true;
            }
        }
    }
    if let Some(i) = stuck_index(&stops) {
        let s = stops.remove(i);
        stops.insert(0, s);
    }
    let mut bt = Backtrace {
        command: procs
            .iter()
            .map(|p| {
                format!(
                    "pid {} {}",
                    p.pid,
                    if p.exe.is_empty() { &p.comm } else { &p.exe }
                )
            })
            .collect::<Vec<_>>()
            .join("; "),
        stops,
        debug_info: false,
        note: None,
        artifact: artifact.to_string(),
    };
    if let (true, Some(e)) = (bt.stops.is_empty(), &failed) {
        bt.note = Some(format!("no frames: attaching gdb failed: {e}"));
        return bt;
    }
    if bt.stops.is_empty() {
        bt.note = Some(why_no_frames(&procs, &caps, none, nogdb));
        return bt;
    }
    describe_frames(&mut bt);
    let missed: Vec<String> = procs
        .iter()
        .filter(|p| p.stops == 0)
        .map(|p| why_not(p, &caps))
        .collect();
    let mut notes: Vec<String> = bt.note.take().into_iter().collect();
    notes.extend(missed);
    if more {
        notes.push(format!(
            "only the first {MAX_PROCESSES} processes were attached to"
        ));
    }
    bt.note = (!notes.is_empty()).then(|| notes.join("; "));
    bt
}

/// `<pid> state <S> comm <name> exe <path>`.
fn proc_line(value: &str) -> Proc {
    let mut p = Proc {
        pid: value.split(' ').next().unwrap_or("?").to_string(),
        ..Proc::default()
    };
    if let Some((_, rest)) = value.split_once(" comm ") {
        let (comm, exe) = rest.split_once(" exe ").unwrap_or((rest, ""));
        p.comm = comm.trim().to_string();
        p.exe = exe.trim().to_string();
    }
    p
}

/// `Thread 2 (Thread 0x7f… (LWP 43) "spin"):` → `thread 2 (LWP 43)`.
fn thread_header(line: &str) -> Option<String> {
    let rest = line.strip_prefix("Thread ")?;
    if !line.ends_with("):") {
        return None;
    }
    let n = rest.split(' ').next()?;
    n.parse::<u32>().ok()?;
    let lwp = rest
        .split_once("(LWP ")
        .and_then(|(_, r)| r.split(')').next())
        .map(|l| format!(" (LWP {l})"))
        .unwrap_or_default();
    Some(format!("thread {n}{lwp}"))
}

/// Why a process of the tree has no frames.
fn why_not(p: &Proc, caps: &str) -> String {
    let who = format!("pid {} ({})", p.pid, p.comm);
    if let Some(wchan) = &p.kernel {
        let wchan = if wchan.is_empty() || wchan == "0" {
            String::new()
        } else {
            format!(", in {wchan}")
        };
        return format!(
            "{who} is in uninterruptible sleep in the kernel (state D{wchan}): gdb cannot attach to it"
        );
    }
    if let Some(e) = &p.refused {
        return format!("gdb could not attach to {who}: {e} {}", ptrace_hint(caps));
    }
    match p.gdb_exit {
        Some(124 | 137) => format!("gdb ran out of time attaching to {who}"),
        Some(code) => format!("gdb printed no frames for {who} (exit {code})"),
        None => format!("{who} was not attached to"),
    }
}

/// Why there are no frames at all.
fn why_no_frames(procs: &[Proc], caps: &str, none: bool, nogdb: bool) -> String {
    if nogdb {
        let who: Vec<String> = procs
            .iter()
            .map(|p| format!("pid {} ({})", p.pid, p.comm))
            .collect();
        return format!(
            "no frames: {} (hung: {})",
            super::gdb::MISSING,
            if who.is_empty() {
                "?".into()
            } else {
                who.join(", ")
            }
        );
    }
    if none || procs.is_empty() {
        return "no frames: no process of the step was left to attach to".into();
    }
    let why: Vec<String> = procs.iter().map(|p| why_not(p, caps)).collect();
    format!("no frames: {}", why.join("; "))
}

/// What stands in the way of ptrace, from the script's first line
/// (`cap=<CapEff hex> seccomp=<mode> yama=<scope|none>`).
fn ptrace_hint(caps: &str) -> String {
    let field = |k: &str| {
        caps.split(' ')
            .find_map(|w| w.strip_prefix(k).and_then(|v| v.strip_prefix('=')))
            .unwrap_or("")
    };
    let mut hints = Vec::new();
    let sys_ptrace = u64::from_str_radix(field("cap"), 16)
        .map(|c| c & (1 << 19) != 0)
        .unwrap_or(false);
    match field("yama") {
        "1" if !sys_ptrace => hints.push(
            "kernel.yama.ptrace_scope is 1 (only a parent may trace) and the container lacks CAP_SYS_PTRACE: add the capability to the cell's container (docker --cap-add SYS_PTRACE) or set the sysctl to 0".to_string(),
        ),
        "2" if !sys_ptrace => hints.push(
            "kernel.yama.ptrace_scope is 2 (admin only) and the container lacks CAP_SYS_PTRACE: add the capability (docker --cap-add SYS_PTRACE)".to_string(),
        ),
        "3" => hints.push("kernel.yama.ptrace_scope is 3: no process may attach until the host lowers it".to_string()),
        _ => {}
    }
    if hints.is_empty() {
        hints.push(if sys_ptrace {
            "(the container has CAP_SYS_PTRACE; a seccomp profile or an LSM refused it)".to_string()
        } else {
            "(the container lacks CAP_SYS_PTRACE, and its seccomp profile may refuse ptrace: Docker's default allows it only on kernels 4.8 and later)".to_string()
        });
    }
    hints.join("; ")
}

/// Whether a frame is the C library's or the thread library's (a wait, a
/// lock, a system call), not the program's own.
fn is_system(f: &Frame) -> bool {
    let lib = f.library.as_deref().unwrap_or("");
    let file = f.file.as_deref().unwrap_or("");
    ["/libc.so", "/libpthread", "/ld-linux", "/libc-"]
        .iter()
        .any(|l| lib.contains(l))
        || ["sysdeps/", "nptl/", "./io/", "./posix/", "./misc/"]
            .iter()
            .any(|d| file.contains(d))
        || (f.file.is_none() && f.library.is_none() && f.function.starts_with("__"))
}

/// The thread stuck in the program's own code: the one whose first frame
/// that is not the C library's is nearest the top (a busy loop, before a
/// thread waiting on it), one with a source line first.
fn stuck_index(stops: &[Stop]) -> Option<usize> {
    stops
        .iter()
        .enumerate()
        .filter_map(|(i, s)| {
            let at = s.frames.iter().position(|f| !is_system(f))?;
            Some((at, s.frames[at].line.is_none(), i))
        })
        .min()
        .map(|(_, _, i)| i)
}

/// The stuck thread's top frames of its own (after the C library's), for a
/// hang's signature: `spin ← work ← main`. Frames without a name (`??`,
/// a stripped library such as a GPU driver's) are passed over: the
/// functions that called into it name the hang. A name that ends in a
/// build's hash (CUDA's static runtime: `libcudart_static_ff466e…`) is
/// named without it, so that one hang is one signature across builds.
pub fn stuck_in(bt: &Backtrace, n: usize) -> Option<String> {
    let s = bt.stops.first().filter(|s| s.at.starts_with("hang: "))?;
    let own: Vec<&str> = s
        .frames
        .iter()
        .skip_while(|f| is_system(f))
        .filter(|f| f.function != "??")
        .take(n)
        .map(|f| without_build_hash(&f.function))
        .collect();
    (!own.is_empty()).then(|| own.join(" ← "))
}

/// `name` without a trailing `_<hash>` of 16 hex digits or more.
fn without_build_hash(name: &str) -> &str {
    match name.rsplit_once('_') {
        Some((stem, hash))
            if !stem.is_empty()
                && hash.len() >= 16
                && hash.bytes().all(|b| b.is_ascii_hexdigit()) =>
        {
            stem
        }
        _ => name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_build_hash_at_the_end_of_a_name_is_left_out() {
        assert_eq!(
            without_build_hash("libcudart_static_ff466e58390a44a174cd1b2084ede65f6033356c"),
            "libcudart_static"
        );
        for kept in [
            "cuCtxSynchronize_v2",
            "poll_device",
            "f_deadbeef",
            "_0123456789abcdef0",
        ] {
            assert_eq!(without_build_hash(kept), kept);
        }
    }

    const ATTACHED: &str = "@@rocmatrix-hang@@ ptrace cap=00000000a80425fb seccomp=2 yama=none
@@rocmatrix-hang@@ pid 12 state R comm spin exe /work/bin/spin
[Thread debugging using libthread_db enabled]
0x000055caccd79136 in spin (n=-1985597197) at /h/spin.c:3
3\tint spin(int n) { while (!done) n++; return n; }

Thread 2 (Thread 0x7fc5ab700640 (LWP 13) \"spin\"):
#0  __futex_abstimed_wait_common () from /lib/x86_64-linux-gnu/libc.so.6
#1  ?? () from /lib/x86_64-linux-gnu/libc.so.6
#2  waiter (a=...) at /h/spin.c:9

Thread 1 (Thread 0x7fc5ab702740 (LWP 12) \"spin\"):
#0  spin (n=...) at /h/spin.c:3
#1  work (n=...) at /h/spin.c:4
#2  main () at /h/spin.c:6
[Inferior 1 (process 12) detached]

@@rocmatrix-hang@@ gdb-exit 0
";

    #[test]
    fn every_thread_is_a_stop_and_the_busy_one_comes_first() {
        let bt = parse(ATTACHED, 8, "backtraces/01-spin.txt");
        assert_eq!(bt.stops.len(), 2);
        assert_eq!(bt.stops[0].at, "hang: pid 12 (spin), thread 1 (LWP 12)");
        let f: Vec<&str> = bt.stops[0]
            .frames
            .iter()
            .map(|f| f.function.as_str())
            .collect();
        assert_eq!(f, ["spin", "work", "main"]);
        assert_eq!(bt.stops[0].frames[1].line, Some(4));
        assert!(bt.debug_info);
        assert_eq!(bt.note, None);
        assert_eq!(bt.command, "pid 12 /work/bin/spin");
        assert_eq!(stuck_in(&bt, 3).as_deref(), Some("spin ← work ← main"));
        // Waiting in the C library: its own frames come after.
        let waiting = Backtrace {
            stops: vec![bt.stops[1].clone()],
            ..bt.clone()
        };
        assert_eq!(stuck_in(&waiting, 2).as_deref(), Some("waiter"));
        // In a stripped driver library: the callers name it.
        let driver = "@@rocmatrix-hang@@ pid 5 state S comm smoke exe /opt/smoke\n\
                      Thread 1 (Thread 0x7f (LWP 5) \"smoke\"):\n\
                      #0  ?? () from /usr/lib/x86_64-linux-gnu/libcuda.so.1\n\
                      #1  ?? () from /usr/lib/x86_64-linux-gnu/libcuda.so.1\n\
                      #2  cudaDeviceSynchronize () from /opt/smoke\n\
                      #3  Gpu_HangsAKernel_Test::TestBody() () from /opt/smoke\n";
        let bt = parse(driver, 8, "a");
        assert_eq!(
            stuck_in(&bt, 2).as_deref(),
            Some("cudaDeviceSynchronize ← Gpu_HangsAKernel_Test::TestBody()")
        );
    }

    #[test]
    fn missing_gdb_kernel_sleep_and_refused_ptrace_say_why() {
        let nogdb = "@@rocmatrix-hang@@ ptrace cap=0 seccomp=2 yama=none\n\
                     @@rocmatrix-hang@@ pid 7 state R comm spin exe /work/bin/spin\n\
                     @@rocmatrix-hang@@ no-gdb\n";
        let note = parse(nogdb, 8, "a").note.unwrap();
        assert!(note.contains("gdb is not installed"), "{note}");
        assert!(note.contains("pid 7 (spin)"), "{note}");
        let d = "@@rocmatrix-hang@@ ptrace cap=0 seccomp=2 yama=none\n\
                 @@rocmatrix-hang@@ pid 7 state D comm cat exe /bin/cat\n\
                 @@rocmatrix-hang@@ kernel nfs_wait_bit_killable\n";
        let note = parse(d, 8, "a").note.unwrap();
        assert!(note.contains("uninterruptible sleep"), "{note}");
        assert!(note.contains("nfs_wait_bit_killable"), "{note}");
        let refused = "@@rocmatrix-hang@@ ptrace cap=00000000a80425fb seccomp=2 yama=1\n\
                       @@rocmatrix-hang@@ pid 7 state R comm spin exe /work/bin/spin\n\
                       ptrace: Operation not permitted.\n\
                       @@rocmatrix-hang@@ gdb-exit 1\n";
        let note = parse(refused, 8, "a").note.unwrap();
        assert!(note.contains("Operation not permitted"), "{note}");
        assert!(note.contains("CAP_SYS_PTRACE"), "{note}");
        assert!(note.contains("kernel.yama.ptrace_scope is 1"), "{note}");
        let late =
            "@@rocmatrix-hang@@ pid 7 state R comm spin exe /x\n@@rocmatrix-hang@@ gdb-exit 124\n";
        assert!(parse(late, 8, "a")
            .note
            .unwrap()
            .contains("ran out of time"));
        let gone = "@@rocmatrix-hang@@ ptrace cap=0 seccomp=0 yama=none\n@@rocmatrix-hang@@ none\n";
        assert!(parse(gone, 8, "a").note.unwrap().contains("no process"));
    }

    /// The script on this machine: a busy child of a shell that carries a
    /// step's name is found and attached to (gdb is installed by
    /// .ci/install-debugger.sh), within its budget.
    #[test]
    fn the_script_finds_a_step_s_tree_and_attaches() {
        use std::os::unix::process::CommandExt;
        use std::process::{Command, Stdio};
        let name = format!("hang-test-{}", std::process::id());
        let mut child = Command::new("bash")
            .args(["-c", "sh -c 'while :; do :; done' & wait"])
            .env("ROCMATRIX_STEP", &name)
            .stdout(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(300));
        let argv = command(&Tree::Step(&name), 30, 8);
        let out = Command::new(&argv[0]).args(&argv[1..]).output().unwrap();
        // The child leads its own process group: the loop goes with it.
        let group = format!("-{}", child.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = child.kill();
        let _ = child.wait();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains(&format!("{MARK} pid ")), "{text}");
        assert!(text.contains("comm sh"), "{text}");
        let bt = parse(&text, 8, "a");
        assert_eq!(bt.command.matches("pid ").count(), 2, "{text}");
    }
}
