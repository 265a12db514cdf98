//! Hostile input: every path that reads what others wrote, tried as an
//! attacker would, each case run as a child process under a memory and time
//! bound. Each test asserts the documented exit code, a message that names
//! the file and what was wrong, and that the case used under [`CPU`] of
//! processor time within an address space of [`MEMORY`], and did not hang.
//!
//! The memory bound is `RLIMIT_AS` (set in the child before `exec`), with
//! `MALLOC_ARENA_MAX=2` so that glibc's per-thread arenas do not reserve the
//! address space by themselves: a case that needs more fails to allocate and
//! aborts, which the exit-code assertion catches. The time bound is the
//! child's own CPU time (user + system, from `wait4`'s resource usage of that
//! one child), not the wall clock, which a busy machine stretches; a child
//! still running after [`KILL_AFTER`] is killed and the case fails as hung.
//! Speed targets belong to `benches/`.

use std::ffi::OsStr;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The most processor time (user + system) a hostile case may use (the
/// issue's bound, which was wall-clock).
const CPU: Duration = Duration::from_secs(2);
/// The address space each case runs in (the issue's bound).
const MEMORY: u64 = 256 << 20;
/// A case still running after this is killed (a hang fails, not blocks).
const KILL_AFTER: Duration = Duration::from_secs(60);

pub struct Bounded {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    /// Killed after [`KILL_AFTER`].
    pub hung: bool,
    /// The child's user + system time.
    pub cpu: Duration,
    /// The child's peak resident set, in bytes.
    pub max_rss: u64,
    /// Wall-clock time, for messages only.
    pub wall: Duration,
}

fn duration(t: libc::timeval) -> Duration {
    Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
}

/// Reaps `pid` with `wait4`: its wait status and resource usage, or `None`
/// while it runs (`block` false).
fn reap(pid: libc::pid_t, block: bool) -> Option<(i32, libc::rusage)> {
    let flags = if block { 0 } else { libc::WNOHANG };
    loop {
        let mut status = 0;
        // SAFETY: an all-zero rusage is valid; both pointers are to locals.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: plain wait4 on our own child.
        let r = unsafe { libc::wait4(pid, &mut status, flags, &mut usage) };
        if r == pid {
            return Some((status, usage));
        }
        if r == 0 {
            return None;
        }
        let e = std::io::Error::last_os_error();
        assert_eq!(e.kind(), std::io::ErrorKind::Interrupted, "wait4: {e}");
    }
}

/// Runs `rocmatrix args…` in `dir` under [`MEMORY`] and [`KILL_AFTER`].
pub fn bounded<S: AsRef<OsStr>>(dir: &Path, args: &[S]) -> Bounded {
    let out = dir.join(".bounded.out");
    let err = dir.join(".bounded.err");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rocmatrix"));
    cmd.args(args)
        .current_dir(dir)
        .env("MALLOC_ARENA_MAX", "2")
        .env("ROCMATRIX_CACHE", dir.join(".cache"))
        .env_remove("ROCMATRIX_LABEL")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap());
    // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: MEMORY,
                rlim_max: MEMORY,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let start = Instant::now();
    // Reaped by `reap` (wait4) rather than by `Child`, for this one child's
    // resource usage (getrusage's RUSAGE_CHILDREN sums every child of the
    // test process, and tests run in parallel).
    #[allow(clippy::zombie_processes, reason = "reaped by wait4 in `reap`")]
    let mut child = cmd.spawn().expect("spawning rocmatrix");
    let pid = child.id() as libc::pid_t;
    let (status, usage, hung) = loop {
        if let Some((status, usage)) = reap(pid, false) {
            break (status, usage, false);
        }
        if start.elapsed() > KILL_AFTER {
            let _ = child.kill();
            let (status, usage) = reap(pid, true).unwrap();
            break (status, usage, true);
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let wall = start.elapsed();
    let read =
        |p: &Path| String::from_utf8_lossy(&std::fs::read(p).unwrap_or_default()).into_owned();
    Bounded {
        code: libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)),
        stdout: read(&out),
        stderr: read(&err),
        hung,
        cpu: duration(usage.ru_utime) + duration(usage.ru_stime),
        max_rss: usage.ru_maxrss as u64 * 1024,
        wall,
    }
}

impl Bounded {
    /// Asserts the exit code, the CPU-time bound and that stderr has every
    /// one of `needles`.
    pub fn expect(&self, what: &str, code: i32, needles: &[&str]) {
        eprintln!(
            "{what}: {:?} CPU, {:?} wall, peak RSS {} MiB",
            self.cpu,
            self.wall,
            self.max_rss >> 20
        );
        assert!(
            !self.hung,
            "{what}: still running after {KILL_AFTER:?} (a hang), killed\nstderr: {}",
            self.stderr
        );
        assert_eq!(
            self.code,
            Some(code),
            "{what}: exit code (None: killed or died of a signal, e.g. out of memory)\nstderr: {}",
            self.stderr
        );
        assert!(
            self.cpu < CPU,
            "{what}: used {:?} of CPU time (user + system), more than {CPU:?} \
             ({:?} wall, peak RSS {} MiB)\nstderr: {}",
            self.cpu,
            self.wall,
            self.max_rss >> 20,
            self.stderr
        );
        for n in needles {
            assert!(
                self.stderr.contains(n),
                "{what}: stderr lacks `{n}`:\n{}",
                self.stderr
            );
        }
    }
}

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap();
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a valid C string.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
}

const STEPS: &str = "steps:\n  - name: s\n    run: echo\n";

/// Nine levels of nine aliases: 9^9 copies of the first list if expanded.
pub fn alias_bomb() -> String {
    let mut doc = String::from(
        "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
    );
    let names = ["a", "b", "c", "d", "e", "f", "g", "h", "i"];
    for w in names.windows(2) {
        let refs = vec![format!("*{}", w[0]); 9].join(",");
        doc.push_str(&format!("{}: &{} [{refs}]\n", w[1], w[1]));
    }
    doc + "matrix:\n  x: [1]\n" + STEPS
}

#[test]
fn hostile_yaml_alias_bomb() {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "bomb.yaml", &alias_bomb());
    bounded(d.path(), &["plan", "bomb.yaml"]).expect(
        "alias bomb",
        2,
        &[
            "bomb.yaml:",
            "more than 500000 nodes once its aliases are expanded",
        ],
    );
}

#[test]
fn hostile_yaml_deep_nesting() {
    let d = tempfile::tempdir().unwrap();
    let deep = format!(
        "matrix:\n  x: {}{}\n",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    write(d.path(), "deep.yaml", &deep);
    bounded(d.path(), &["plan", "deep.yaml"]).expect(
        "deep YAML",
        2,
        &["deep.yaml:2:", "recursion limit exceeded"],
    );
}

#[test]
fn hostile_matrix_of_ten_billion_cells() {
    let d = tempfile::tempdir().unwrap();
    let mut m = String::from("matrix:\n");
    for i in 0..10 {
        m.push_str(&format!("  a{i}: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\n"));
    }
    write(d.path(), "cells.yaml", &(m + STEPS));
    bounded(d.path(), &["plan", "cells.yaml"]).expect(
        "10^10 cells",
        2,
        &["cells.yaml:2:3:", "10000000000 cells", "--max-cells"],
    );
}

#[test]
fn hostile_matrix_file_that_is_a_fifo_or_dev_zero() {
    let d = tempfile::tempdir().unwrap();
    mkfifo(&d.path().join("fifo.yaml"));
    bounded(d.path(), &["plan", "fifo.yaml"]).expect(
        "FIFO matrix",
        2,
        &["fifo.yaml: cannot read: not a regular file but a named pipe (FIFO)"],
    );
    std::os::unix::fs::symlink("/dev/zero", d.path().join("zero.yaml")).unwrap();
    bounded(d.path(), &["validate", "zero.yaml"]).expect(
        "symlink to /dev/zero",
        2,
        &["zero.yaml: cannot read: not a regular file but a character device"],
    );
    std::os::unix::fs::symlink("loop.yaml", d.path().join("loop.yaml")).unwrap();
    bounded(d.path(), &["plan", "loop.yaml"]).expect(
        "symlink loop",
        2,
        &["loop.yaml: cannot read:", "symbolic links"],
    );
    let big = format!("matrix:\n  x: [1]\n{STEPS}#{}\n", "x".repeat(5 << 20));
    write(d.path(), "big.yaml", &big);
    bounded(d.path(), &["plan", "big.yaml"]).expect(
        "5 MiB matrix",
        2,
        &[
            "big.yaml: cannot read:",
            "larger than the limit for matrix files, 4 MiB",
        ],
    );
}

#[test]
fn hostile_matrix_with_a_byte_order_mark_is_read() {
    let d = tempfile::tempdir().unwrap();
    write(
        d.path(),
        "bom.yaml",
        &format!("\u{feff}matrix:\n  x: [1, 2]\n{STEPS}"),
    );
    let b = bounded(d.path(), &["plan", "bom.yaml"]);
    b.expect("BOM", 0, &[]);
    assert!(b.stdout.contains("2 cells"), "{}", b.stdout);
}

#[test]
fn hostile_duplicate_keys_are_errors() {
    let d = tempfile::tempdir().unwrap();
    write(
        d.path(),
        "vars.yaml",
        &format!("vars:\n  a: \"1\"\n  a: \"2\"\nmatrix:\n  x: [1]\n{STEPS}"),
    );
    bounded(d.path(), &["plan", "vars.yaml"]).expect(
        "duplicate vars",
        2,
        &["vars.yaml:3:3:", "duplicate key `a` (first at line 2)"],
    );
    for (what, entry) in [
        ("include", "{x: 1, y: 2, y: 3}"),
        ("exclude", "{x: 1, x: 2}"),
    ] {
        write(
            d.path(),
            "e.yaml",
            &format!("matrix:\n  x: [1, 2]\n  {what}:\n    - {entry}\n{STEPS}"),
        );
        bounded(d.path(), &["plan", "e.yaml"]).expect(what, 2, &["e.yaml:4:", "duplicate key"]);
    }
}

#[test]
fn hostile_axis_of_80000_values() {
    let d = tempfile::tempdir().unwrap();
    let values: Vec<String> = (0..80_000).map(|i| format!("v{i}")).collect();
    write(
        d.path(),
        "axis.yaml",
        &format!("matrix:\n  x: [{}]\n{STEPS}", values.join(",")),
    );
    bounded(d.path(), &["validate", "axis.yaml"]).expect(
        "80,000 axis values",
        2,
        &["axis.yaml:2:3:", "80000 cells, more than --max-cells 4096"],
    );
    // A value twice among them is found at once, not by comparing all pairs.
    let mut values = values;
    values[79_999] = "v0".into();
    write(
        d.path(),
        "axis.yaml",
        &format!("matrix:\n  x: [{}]\n{STEPS}", values.join(",")),
    );
    bounded(d.path(), &["validate", "axis.yaml"]).expect(
        "80,000 axis values, one twice",
        2,
        &["axis.yaml:2:", "axis `x` lists `v0` twice"],
    );
}

fn over_64x64(include: impl Fn(usize) -> String) -> String {
    let a: Vec<String> = (0..64).map(|i| format!("a{i}")).collect();
    let b: Vec<String> = (0..64).map(|i| format!("b{i}")).collect();
    let inc: Vec<String> = (0..1000)
        .map(|i| format!("    - {}\n", include(i)))
        .collect();
    format!(
        "matrix:\n  a: [{}]\n  b: [{}]\n  include:\n{}{STEPS}",
        a.join(","),
        b.join(","),
        inc.concat()
    )
}

#[test]
fn hostile_thousand_includes_over_4096_cells() {
    let d = tempfile::tempdir().unwrap();
    // Each entry fits the 64 cells of one `a`, adding a key of its own.
    write(
        d.path(),
        "inc.yaml",
        &over_64x64(|i| format!("{{a: a{}, extra{i}: y}}", i % 64)),
    );
    let b = bounded(d.path(), &["validate", "inc.yaml"]);
    b.expect("1,000 includes", 0, &[]);
    assert!(b.stdout.contains("ok, 4096 cells"), "{}", b.stdout);
    // The plan table shows 32 key columns: here of 102.
    let inc: Vec<String> = (0..100)
        .map(|i| format!("    - {{a: a{}, extra{i}: y}}\n", i % 8))
        .collect();
    write(
        d.path(),
        "table.yaml",
        &format!(
            "matrix:\n  a: [a0,a1,a2,a3,a4,a5,a6,a7]\n  b: [b0,b1]\n  include:\n{}{STEPS}",
            inc.concat()
        ),
    );
    let b = bounded(d.path(), &["plan", "table.yaml"]);
    b.expect("plan table of 102 keys", 0, &[]);
    assert!(b.stdout.contains("70 more keys not shown"), "{}", b.stdout);
    assert!(b.stdout.contains("16 cells"), "{}", b.stdout);
    // Each entry fits every cell: four million pairs, refused at the limit.
    write(
        d.path(),
        "inc.yaml",
        &over_64x64(|i| format!("{{extra{i}: y}}")),
    );
    bounded(d.path(), &["plan", "inc.yaml"]).expect(
        "1,000 includes fitting every cell",
        2,
        &["inc.yaml:", "more than 262144 key/value pairs"],
    );
}

#[test]
fn hostile_typo_of_exclude_is_named() {
    let d = tempfile::tempdir().unwrap();
    write(
        d.path(),
        "m.yaml",
        &format!("matrix:\n  x: [1, 2]\n  exlcude:\n    - x: 1\n{STEPS}"),
    );
    bounded(d.path(), &["plan", "m.yaml"]).expect(
        "exlcude under matrix",
        2,
        &["m.yaml:4:", "did you mean `exclude`?"],
    );
    write(
        d.path(),
        "m.yaml",
        &format!("matrix:\n  x: [1, 2]\nexlcude:\n  - x: 1\n{STEPS}"),
    );
    bounded(d.path(), &["plan", "m.yaml"]).expect(
        "exlcude at the top",
        2,
        &[
            "m.yaml:3:1:",
            "unknown field `exlcude`",
            "did you mean `exclude` (it goes under `matrix:`)?",
        ],
    );
    write(
        d.path(),
        "m.yaml",
        "matrix:\n  x: [1]\nstpes:\n  - {name: s, run: echo}\n",
    );
    bounded(d.path(), &["plan", "m.yaml"]).expect("stpes", 2, &["did you mean `steps`?"]);
}

fn template(run: &str) -> String {
    format!("matrix:\n  x: [1]\nsteps:\n  - name: s\n    run: '{run}'\n")
}

#[test]
fn hostile_template_that_doubles_a_string_30_times() {
    let d = tempfile::tempdir().unwrap();
    let mut t = String::from("{% set s0 = \"xxxxxxxx\" %}");
    for i in 0..30 {
        t.push_str(&format!("{{% set s{} = s{i} ~ s{i} %}}", i + 1));
    }
    t.push_str("{{ s30 }}");
    write(d.path(), "double.yaml", &template(&t));
    bounded(d.path(), &["plan", "double.yaml"]).expect(
        "string doubled 30 times",
        2,
        &[
            "double.yaml:5:10: steps[0].run:",
            "more than 64 MiB of memory",
            "rendering cell 1",
        ],
    );
    // The same growth through a filter, without `set`.
    let t = format!(
        "{{{{ \"xxxxxxxxxx\"{} }}}}",
        "|replace(\"\", \"xxxxxxxxxx\")".repeat(9)
    );
    write(d.path(), "replace.yaml", &template(&t));
    bounded(d.path(), &["plan", "replace.yaml"]).expect(
        "replace chain",
        2,
        &["replace.yaml:5:10:", "more than 64 MiB of memory"],
    );
}

#[test]
fn hostile_template_with_nested_loops_or_huge_output() {
    let d = tempfile::tempdir().unwrap();
    let t = "{% for a in range(100000) %}{% for b in range(100000) %}x{% endfor %}{% endfor %}";
    write(d.path(), "loops.yaml", &template(t));
    bounded(d.path(), &["plan", "loops.yaml"]).expect(
        "nested loops",
        2,
        &[
            "loops.yaml:5:10: steps[0].run:",
            "more than 100000 instructions",
        ],
    );
    write(d.path(), "big.yaml", &template("{{ \"x\" * 3000000 }}"));
    bounded(d.path(), &["plan", "big.yaml"]).expect(
        "3 MB output",
        2,
        &["big.yaml:5:10: steps[0].run:", "renders to more than 1 MiB"],
    );
}

/// `report junit DIR/c --cell-from-dir` over one file `r.xml` (written by
/// `make`), asserting exit 1 (the cell is an error), the bounds, and that
/// the summary has every one of `needles`.
fn junit_case(what: &str, make: impl FnOnce(&Path), needles: &[&str]) -> String {
    let d = tempfile::tempdir().unwrap();
    let cell = d.path().join("c");
    std::fs::create_dir(&cell).unwrap();
    make(&cell.join("r.xml"));
    let b = bounded(
        d.path(),
        &["report", "junit", "c", "--cell-from-dir", "--out", "rep"],
    );
    b.expect(what, 1, &[]);
    let summary = std::fs::read_to_string(d.path().join("rep/summary.md")).unwrap();
    for n in needles {
        assert!(
            summary.contains(n),
            "{what}: summary.md lacks `{n}`:\n{summary}"
        );
    }
    summary
}

fn big_file(path: &Path, head: &str, fill: u8, size: usize, foot: &str) {
    use std::io::Write;
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    f.write_all(head.as_bytes()).unwrap();
    let block = vec![fill; 1 << 20];
    for _ in 0..size >> 20 {
        f.write_all(&block).unwrap();
    }
    f.write_all(foot.as_bytes()).unwrap();
}

#[test]
fn hostile_junit_200000_nested_suites() {
    junit_case(
        "nested suites",
        |p| {
            let xml = format!(
                "<testsuites>{}{}</testsuites>",
                "<testsuite name=\"suite-name\">".repeat(200_000),
                "</testsuite>".repeat(200_000)
            );
            std::fs::write(p, xml).unwrap();
        },
        &["r.xml: elements nested more than 256 deep at byte"],
    );
}

#[test]
fn hostile_junit_200_mb_attribute_and_text() {
    junit_case(
        "200 MB attribute",
        |p| {
            big_file(
                p,
                "<testsuite name=\"s\"><testcase name=\"a\"/><testcase name=\"t\"><failure message=\"",
                b'A',
                200 << 20,
                "\"/></testcase></testsuite>",
            )
        },
        &[
            "r.xml: a tag longer than 8 MiB",
            "complete test cases before it are kept",
            "1 passed",
        ],
    );
    // A 200 MB failure text is cut to the kept size, and the file is read to its end.
    let d = tempfile::tempdir().unwrap();
    let cell = d.path().join("c");
    std::fs::create_dir(&cell).unwrap();
    big_file(
        &cell.join("r.xml"),
        "<testsuite name=\"s\"><testcase name=\"t\"><failure message=\"m\"><![CDATA[",
        b'B',
        200 << 20,
        "]]></failure></testcase><testcase name=\"after\"/></testsuite>",
    );
    let b = bounded(
        d.path(),
        &["report", "junit", "c", "--cell-from-dir", "--out", "rep"],
    );
    b.expect("200 MB failure text", 1, &[]);
    let json = std::fs::read_to_string(d.path().join("rep/results.json")).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    let cell = &doc["cells"][0];
    assert_eq!(cell["counts"]["failed"], 1, "{cell}");
    assert_eq!(cell["counts"]["passed"], 1, "{cell}");
    assert!(cell["tests"][0]["output"].as_str().unwrap().len() < 64 << 10);
}

#[test]
fn hostile_junit_fifo_dev_zero_and_symlink_loop() {
    junit_case(
        "FIFO",
        mkfifo,
        &["r.xml: cannot read: not a regular file but a named pipe"],
    );
    junit_case(
        "symlink to /dev/zero",
        |p| std::os::unix::fs::symlink("/dev/zero", p).unwrap(),
        &["r.xml: cannot read:", "leads out of c", "/dev/zero"],
    );
    junit_case(
        "symlink loop",
        |p| std::os::unix::fs::symlink("r.xml", p).unwrap(),
        &["r.xml: cannot read:", "symbolic links"],
    );
}

#[test]
fn hostile_junit_entities_truncated_and_garbage() {
    let xxe = "<?xml version=\"1.0\"?><!DOCTYPE t [<!ENTITY x SYSTEM \"file:///etc/passwd\">]>\
               <testsuite name=\"s\"><testcase name=\"t\"><failure>&x;</failure></testcase></testsuite>";
    let s = junit_case("XXE", |p| std::fs::write(p, xxe).unwrap(), &["1 failed"]);
    assert!(!s.contains("root:"), "{s}");
    let mut bomb = String::from("<?xml version=\"1.0\"?><!DOCTYPE t [<!ENTITY a \"lollollollol\">");
    for (n, p) in ["b", "c", "d", "e", "f", "g", "h", "i"]
        .iter()
        .zip(["a", "b", "c", "d", "e", "f", "g", "h"])
    {
        bomb.push_str(&format!(
            "<!ENTITY {n} \"{}\">",
            format!("&{p};").repeat(10)
        ));
    }
    bomb.push_str("]><testsuite name=\"s\"><testcase name=\"t\"><failure>&i;</failure></testcase></testsuite>");
    junit_case(
        "entity bomb",
        |p| std::fs::write(p, &bomb).unwrap(),
        &["1 failed"],
    );
    junit_case(
        "truncated",
        |p| {
            std::fs::write(
                p,
                "<testsuite name=\"s\"><testcase name=\"a\"/><testcase name=\"b\"><fail",
            )
            .unwrap()
        },
        &["r.xml: report cut off at byte", "1 passed"],
    );
    junit_case(
        "garbage",
        |p| {
            std::fs::write(
                p,
                b"<testsuite name=\"s\"><testcase name=\"a\"/></testcase>\x00\xff<<>>",
            )
            .unwrap()
        },
        &["r.xml: invalid XML at byte"],
    );
}

#[test]
fn hostile_run_store_paths_stay_inside_the_store() {
    use crate::harness::{make_run, CellSpec};
    let d = tempfile::tempdir().unwrap();
    let ok = "<testsuite name=\"s\"><testcase name=\"a\"/></testsuite>";
    let run = make_run(
        d.path(),
        "run1",
        &"a".repeat(64),
        &["x"],
        serde_json::json!([]),
        (&["x"], &[]),
        None,
        &[CellSpec::new("c", &[("x", "1")], "passed").junit("ok.xml", ok)],
    );
    // A downloaded artifact's cell.json naming host files.
    let cdir = run.join("cells/c");
    std::os::unix::fs::symlink("/etc/passwd", cdir.join("junit/link.xml")).unwrap();
    let rec_path = cdir.join("cell.json");
    let mut rec: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&rec_path).unwrap()).unwrap();
    rec["junit"] = serde_json::json!([
        "junit/ok.xml",
        "/etc/passwd",
        "../../../../../../etc/passwd",
        "junit/link.xml"
    ]);
    std::fs::write(&rec_path, serde_json::to_vec(&rec).unwrap()).unwrap();

    for args in [
        vec!["report", "merge", "run1", "--out", "merged"],
        vec!["report", "run1"],
        vec![
            "report",
            "junit",
            "run1/cells/c",
            "--cell-from-dir",
            "--out",
            "j",
            "--baseline",
            "run1",
        ],
    ] {
        let b = bounded(d.path(), &args);
        b.expect(&args.join(" "), 1, &[]);
    }
    let summary = std::fs::read_to_string(d.path().join("merged/summary.md")).unwrap();
    for n in [
        "⚠️ /etc/passwd: cannot read:",
        "⚠️ ../../../../../../etc/passwd: cannot read:",
        "is not a relative path inside run1/cells/c",
        "⚠️ junit/link.xml: cannot read:",
        "leads out of run1/cells/c (to /etc/passwd) through a symlink",
    ] {
        assert!(summary.contains(n), "summary lacks `{n}`:\n{summary}");
    }
    for f in [
        "merged/junit.xml",
        "merged/results.json",
        "run1/report/junit.xml",
    ] {
        let text = std::fs::read_to_string(d.path().join(f)).unwrap();
        assert!(!text.contains("root:x:0:0"), "{f} has /etc/passwd in it");
    }
}

#[test]
fn hostile_small_items_out_file_and_missing_baseline() {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir(d.path().join("c")).unwrap();
    write(
        d.path(),
        "c/r.xml",
        "<testsuite name=\"s\"><testcase name=\"a\"/></testsuite>",
    );
    write(d.path(), "afile", "");
    bounded(
        d.path(),
        &["report", "junit", "c", "--cell-from-dir", "--out", "afile"],
    )
    .expect(
        "--out FILE",
        2,
        &["--out afile: is a file, not a directory"],
    );
    bounded(
        d.path(),
        &[
            "report",
            "junit",
            "c",
            "--cell-from-dir",
            "--out",
            "rep",
            "--baseline",
            "nothere",
        ],
    )
    .expect(
        "--baseline of nothing",
        2,
        &["nothere: no such file or directory; --baseline takes a run directory"],
    );
}

/// A copy of the gfx900 KFD fixture, whose GPU node's `properties` is `path`.
fn kfd_copy(dir: &Path) -> std::path::PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kfd/gfx900");
    let st = Command::new("cp")
        .arg("-r")
        .arg(&src)
        .arg(dir.join("sys"))
        .status()
        .unwrap();
    assert!(st.success());
    dir.join("sys/class/kfd/kfd/topology/nodes/1/properties")
}

#[test]
fn hostile_kfd_render_minor_overflow_and_fifo() {
    let d = tempfile::tempdir().unwrap();
    let props = kfd_copy(d.path());
    let text = std::fs::read_to_string(&props).unwrap();
    std::fs::write(
        &props,
        text.replace("drm_render_minor 128", "drm_render_minor 4294967424"),
    )
    .unwrap();
    let b = bounded(d.path(), &["gpus", "--sysfs-root", "sys"]);
    b.expect(
        "drm_render_minor 2^32+128",
        3,
        &["nodes/1/properties:24: `drm_render_minor` 4294967424 does not fit 32 bits"],
    );
    assert!(!b.stdout.contains("renderD128"), "{}", b.stdout);

    std::fs::remove_file(&props).unwrap();
    mkfifo(&props);
    bounded(d.path(), &["gpus", "--sysfs-root", "sys"]).expect(
        "properties FIFO",
        3,
        &["nodes/1/properties: not a regular file but a named pipe"],
    );
}

/// A CCOB v3 bundle whose zstd frame (RLE blocks, 4 bytes per 128 KiB)
/// expands to 4 GiB, padded with zeros to a 4 MiB payload: the padding
/// made 4 GiB look like 1024:1.
fn ccob_bomb() -> Vec<u8> {
    let blocks: u32 = 32_768;
    let mut frame = vec![0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x38];
    for i in 0..blocks {
        let last = u32::from(i == blocks - 1);
        let header = last | (1 << 1) | (131_072 << 3);
        frame.extend_from_slice(&header.to_le_bytes()[..3]);
        frame.push(0);
    }
    frame.resize(4 << 20, 0);
    let mut out = b"CCOB".to_vec();
    out.extend_from_slice(&3u16.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes());
    out.extend_from_slice(&(32 + frame.len() as u64).to_le_bytes());
    out.extend_from_slice(&(u64::from(blocks) * 131_072).to_le_bytes());
    out.extend_from_slice(&0x1234u64.to_le_bytes());
    out.extend_from_slice(&frame);
    out
}

#[test]
fn hostile_bundles_ccob_bomb_fake_header_and_truncated_elf() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("bomb.ccob"), ccob_bomb()).unwrap();
    // Read as far as its table, the bomb has none; read whole, it is refused
    // as the bomb it is.
    bounded(d.path(), &["bundles", "bomb.ccob"]).expect(
        "CCOB 4 MiB -> 4 GiB, its table",
        2,
        &["bomb.ccob: at offset 0x", "decompressed bundle:"],
    );
    bounded(d.path(), &["bundles", "--verify", "bomb.ccob"]).expect(
        "CCOB 4 MiB -> 4 GiB",
        2,
        &[
            "bomb.ccob: at offset 0x20:",
            "expands more than 1024:1",
            "decompression bomb",
        ],
    );
    let mut fake = b"CCOB".to_vec();
    fake.extend_from_slice(&3u16.to_le_bytes());
    fake.extend_from_slice(&1u16.to_le_bytes());
    fake.extend_from_slice(&48u64.to_le_bytes());
    fake.extend_from_slice(&(4u64 << 30).to_le_bytes());
    fake.extend_from_slice(&[0; 24]);
    std::fs::write(d.path().join("fake.ccob"), fake).unwrap();
    bounded(d.path(), &["bundles", "fake.ccob"]).expect(
        "CCOB header claiming 4 GiB",
        2,
        &["fake.ccob: at offset 0x10: uncompressed size 4294967296 implausible"],
    );
    // An ELF header alone, its section table claimed at 2^64 - 256 with 65,535
    // entries: the target comes from e_flags, and no section is read.
    let mut elf = vec![0u8; 64];
    elf[..7].copy_from_slice(b"\x7fELF\x02\x01\x01");
    elf[16..18].copy_from_slice(&1u16.to_le_bytes());
    elf[18..20].copy_from_slice(&224u16.to_le_bytes());
    elf[40..48].copy_from_slice(&0xffff_ffff_ffff_ff00u64.to_le_bytes());
    elf[48..52].copy_from_slice(&0x2cu32.to_le_bytes());
    elf[58..60].copy_from_slice(&64u16.to_le_bytes());
    elf[60..62].copy_from_slice(&65_535u16.to_le_bytes());
    elf[62..64].copy_from_slice(&65_534u16.to_le_bytes());
    std::fs::write(d.path().join("cut.o"), elf).unwrap();
    let b = bounded(d.path(), &["bundles", "cut.o"]);
    b.expect("truncated ELF, absurd section offsets", 0, &[]);
    assert!(
        b.stdout.contains("cut.o: gfx900 [code object]"),
        "{}",
        b.stdout
    );
}

#[test]
fn hostile_report_filter_escape_is_caught() {
    // The page's script decodes `#filter=` from the URL; a malformed escape
    // (`%E0%A4%A`) throws URIError, which must not stop the script. The
    // headless-browser test (report_html.rs) loads such a URL where
    // chromium is installed; this checks the page everywhere.
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir(d.path().join("c")).unwrap();
    write(
        d.path(),
        "c/r.xml",
        "<testsuite name=\"s\"><testcase name=\"a\"/></testsuite>",
    );
    bounded(
        d.path(),
        &["report", "junit", "c", "--cell-from-dir", "--out", "rep"],
    )
    .expect("report", 0, &[]);
    let page = std::fs::read_to_string(d.path().join("rep/index.html")).unwrap();
    let at = page
        .find("decodeURIComponent(")
        .expect("the page decodes the filter");
    let before = &page[..at];
    let open = before
        .rfind("try {")
        .expect("decodeURIComponent inside try");
    assert!(
        !before[open..].contains('}'),
        "decodeURIComponent is not inside the try block"
    );
    assert!(page[at..].contains("catch (e)"));
}
