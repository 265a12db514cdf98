//! Slurm's client commands, as the executor uses them: `sbatch` to submit
//! an array, `squeue` for the tasks still pending or running, `scontrol
//! show job` for how a finished task ended (accounting, `sacct`, needs a
//! slurmdbd that a cluster may not have), `scancel` to stop it all. Each
//! runs under a deadline; their words are parsed here and nowhere else.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use super::ClusterError;

/// How long one client command may take before the controller is taken as
/// not answering.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// Runs `program args…`, its output as text; a missing program, a
/// deadline passed or a failing exit is an error that names `cells`.
async fn run(program: &str, args: &[String], cells: &str) -> Result<String, ClusterError> {
    let child = tokio::process::Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|source| ClusterError::Missing {
            program: program.to_string(),
            cells: cells.to_string(),
            source,
        })?;
    let out = tokio::time::timeout(DEADLINE, child.wait_with_output())
        .await
        .map_err(|_| ClusterError::Command {
            program: program.to_string(),
            message: format!("no answer in {} s", DEADLINE.as_secs()),
        })?
        .map_err(|e| ClusterError::Command {
            program: program.to_string(),
            message: e.to_string(),
        })?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    let message = String::from_utf8_lossy(&out.stderr).trim().to_string();
    if program == "sbatch" {
        return Err(ClusterError::Refused {
            usage: refused_request(&message),
            cells: cells.to_string(),
            message,
        });
    }
    Err(ClusterError::Command {
        program: program.to_string(),
        message: format!("{}: {message}", out.status),
    })
}

/// Whether sbatch's complaint is about what was asked for (a partition,
/// account, gres, time, QOS the cluster does not have: the user's to fix,
/// exit 2) rather than about the cluster (a controller that does not
/// answer: exit 3).
pub fn refused_request(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    [
        "invalid partition",
        "invalid account",
        "invalid qos",
        "invalid generic resource",
        "invalid gres",
        "requested node configuration is not available",
        "requested time limit is invalid",
        "invalid time limit",
        "invalid job array specification",
        "unrecognized option",
        "invalid option",
        "unknown option",
        "invalid feature",
        "access/permission denied",
        "user's group not permitted",
    ]
    .iter()
    .any(|p| m.contains(p))
}

/// `sbatch --parsable OPTIONS SCRIPT`: the job id.
pub async fn sbatch(
    options: &[String],
    script: &Path,
    cells: &str,
) -> Result<String, ClusterError> {
    let mut args = vec!["--parsable".to_string()];
    args.extend(options.iter().cloned());
    args.push(script.display().to_string());
    let out = run("sbatch", &args, cells).await?;
    // `ID` or `ID;CLUSTER`.
    let id = out.trim().split(';').next().unwrap_or_default().to_string();
    if id.is_empty() || !id.chars().all(|c| c.is_ascii_digit()) {
        return Err(ClusterError::Command {
            program: "sbatch".into(),
            message: format!("expected a job id from --parsable, got {:?}", out.trim()),
        });
    }
    Ok(id)
}

/// The state of a task Slurm still lists: `PENDING`, `RUNNING`, …
pub type Queue = BTreeMap<(String, usize), String>;

/// `squeue` for the arrays `jobs`: (job, task) → state, one line per task.
pub async fn squeue(jobs: &[String]) -> Result<Queue, ClusterError> {
    if jobs.is_empty() {
        return Ok(Queue::new());
    }
    let args = vec![
        "--noheader".to_string(),
        "--array".to_string(),
        format!("--jobs={}", jobs.join(",")),
        "--format=%F %K %T".to_string(),
    ];
    let out = run("squeue", &args, "").await?;
    Ok(parse_squeue(&out))
}

/// Lines of `ARRAY_JOB_ID TASK STATE`; a pending range (`3-5`, `[3-5%2]`)
/// counts for each of its tasks.
pub fn parse_squeue(out: &str) -> Queue {
    let mut q = Queue::new();
    for line in out.lines() {
        let mut w = line.split_whitespace();
        let (Some(job), Some(tasks), Some(state)) = (w.next(), w.next(), w.next()) else {
            continue;
        };
        let tasks = tasks.trim_start_matches('[').trim_end_matches(']');
        let tasks = tasks.split('%').next().unwrap_or(tasks);
        for part in tasks.split(',') {
            let (a, b) = part.split_once('-').unwrap_or((part, part));
            if let (Ok(a), Ok(b)) = (a.parse::<usize>(), b.parse::<usize>()) {
                for t in a..=b.min(a + 100_000) {
                    q.insert((job.to_string(), t), state.to_string());
                }
            }
        }
    }
    q
}

/// How a finished task ended, as `scontrol show job` tells it: its
/// `JobState` and `Reason`, or nothing once the controller forgot it.
pub async fn task_end(job: &str, task: usize) -> Option<(String, String)> {
    let args = vec![
        "--oneliner".to_string(),
        "show".to_string(),
        "job".to_string(),
        format!("{job}_{task}"),
    ];
    let out = run("scontrol", &args, "").await.ok()?;
    let fields = parse_scontrol(&out);
    let state = fields.get("JobState")?.clone();
    let mut why = fields.get("Reason").cloned().unwrap_or_default();
    if let Some(code) = fields.get("ExitCode").filter(|c| *c != "0:0") {
        why = format!(
            "exit code {code}{}",
            if why == "None" {
                String::new()
            } else {
                format!(", {why}")
            }
        );
    }
    Some((state, why))
}

/// `Key=Value` words of `scontrol --oneliner`, the first of each key.
pub fn parse_scontrol(out: &str) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    for word in out.split_whitespace() {
        if let Some((k, v)) = word.split_once('=') {
            m.entry(k.to_string()).or_insert_with(|| v.to_string());
        }
    }
    m
}

/// `scancel JOB…`.
pub async fn scancel(jobs: &[String]) -> Result<(), ClusterError> {
    if jobs.is_empty() {
        return Ok(());
    }
    run("scancel", jobs, "").await.map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn squeue_lines_and_pending_ranges() {
        let q = parse_squeue("12 3 RUNNING\n12 [4-6%2] PENDING\n13 1 PENDING\n");
        assert_eq!(q.len(), 5);
        assert_eq!(q[&("12".to_string(), 5)], "PENDING");
        assert_eq!(q[&("12".to_string(), 3)], "RUNNING");
    }

    #[test]
    fn refusals_of_the_request_are_usage() {
        assert!(refused_request(
            "sbatch: error: Batch job submission failed: Invalid partition name specified"
        ));
        assert!(refused_request(
            "sbatch: error: Batch job submission failed: Requested node configuration is not available"
        ));
        assert!(!refused_request(
            "sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)"
        ));
    }
}
