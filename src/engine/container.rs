//! Containers: create, exec with streamed output, copy in and out, remove.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use bollard::exec::{StartExecOptions, StartExecResults};
use bollard::models::{ContainerCreateBody, DeviceMapping, ExecConfig, HostConfig};
use bollard::query_parameters::{
    CreateContainerOptions, DownloadFromContainerOptions, KillContainerOptions,
    ListContainersOptions, RemoveContainerOptions, UploadToContainerOptions,
};
use futures_util::StreamExt;
use tokio::io::AsyncWriteExt;

use super::{Context, Engine, EngineError};
use crate::digest::short;

/// What a cell's container looks like.
#[derive(Debug, Clone, Default)]
pub struct ContainerSpec {
    pub name: String,
    pub image: String,
    pub labels: HashMap<String, String>,
    /// `KEY=value` pairs.
    pub env: Vec<String>,
    /// Device nodes: (path on the host, path in the container).
    pub devices: Vec<(String, String)>,
    /// Numeric group ids added to the container's user.
    pub group_add: Vec<String>,
    /// Bind mounts, as the engine writes them: `host:container[:ro]`.
    pub binds: Vec<String>,
    pub memory_bytes: Option<i64>,
    pub network_mode: Option<String>,
    pub working_dir: Option<String>,
    pub security_opt: Vec<String>,
    /// Capabilities added to the engine's default set (`SYS_PTRACE`).
    pub cap_add: Vec<String>,
}

/// How an exec ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecOutcome {
    Exited(i64),
    TimedOut,
}

/// A container's attached output stream (stdout and stderr frames in
/// arrival order).
pub struct Attached {
    pub container: String,
    output: std::pin::Pin<
        Box<
            dyn futures_util::Stream<
                    Item = Result<bollard::container::LogOutput, bollard::errors::Error>,
                > + Send,
        >,
    >,
    // Held so that the engine does not see the attach connection close.
    _input: std::pin::Pin<Box<dyn tokio::io::AsyncWrite + Send>>,
}

impl Attached {
    /// The next bytes the container wrote, or `None` when its output closed.
    pub async fn next(&mut self) -> Result<Option<bytes::Bytes>, EngineError> {
        match self.output.next().await {
            None => Ok(None),
            Some(Ok(frame)) => Ok(Some(frame.into_bytes())),
            Some(Err(e)) => Err(e)
                .doing(|| format!("reading the output of container {}", short(&self.container))),
        }
    }
}

/// A container found by label.
#[derive(Debug, Clone)]
pub struct LabelledContainer {
    pub id: String,
    pub names: Vec<String>,
    pub labels: HashMap<String, String>,
    pub state: String,
}

impl LabelledContainer {
    /// Its first name without the leading `/`, else its id.
    pub fn name(&self) -> &str {
        self.names
            .first()
            .map(|n| n.trim_start_matches('/'))
            .unwrap_or(&self.id)
    }
}

impl Engine {
    /// Creates and starts a container that idles until removed; steps run in
    /// it by exec. Returns its id.
    pub async fn start_container(&self, spec: &ContainerSpec) -> Result<String, EngineError> {
        let id = self
            .create_container(spec, vec!["sleep".into(), "infinity".into()])
            .await?;
        self.start_created(&id, spec).await?;
        Ok(id)
    }

    /// Creates (does not start) the container `spec` describes, running
    /// `cmd` as its main process once started. Returns its id.
    pub async fn create_container(
        &self,
        spec: &ContainerSpec,
        cmd: Vec<String>,
    ) -> Result<String, EngineError> {
        let action = || format!("creating container {} from {}", spec.name, spec.image);
        let host_config = HostConfig {
            devices: Some(
                spec.devices
                    .iter()
                    .map(|(host, inside)| DeviceMapping {
                        path_on_host: Some(host.clone()),
                        path_in_container: Some(inside.clone()),
                        cgroup_permissions: Some("rwm".into()),
                    })
                    .collect(),
            ),
            group_add: Some(spec.group_add.clone()).filter(|g| !g.is_empty()),
            binds: Some(spec.binds.clone()).filter(|b| !b.is_empty()),
            memory: spec.memory_bytes,
            // Without swap limits an OOM shows up as swapping, not as a kill.
            memory_swap: spec.memory_bytes,
            network_mode: spec.network_mode.clone(),
            security_opt: Some(spec.security_opt.clone()).filter(|s| !s.is_empty()),
            cap_add: Some(spec.cap_add.clone()).filter(|s| !s.is_empty()),
            ..Default::default()
        };
        let body = ContainerCreateBody {
            image: Some(spec.image.clone()),
            cmd: Some(cmd),
            env: Some(spec.env.clone()),
            labels: Some(self.labelled(&spec.labels)),
            working_dir: spec.working_dir.clone(),
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            host_config: Some(host_config),
            ..Default::default()
        };
        let opts = CreateContainerOptions {
            name: Some(spec.name.clone()),
            ..Default::default()
        };
        let created = self
            .docker()
            .create_container(Some(opts), body)
            .await
            .doing(action)?;
        Ok(created.id)
    }

    /// Starts a created container; one that fails to start is removed.
    pub async fn start_created(&self, id: &str, spec: &ContainerSpec) -> Result<(), EngineError> {
        let action = || format!("starting container {} from {}", spec.name, spec.image);
        if let Err(e) = self
            .docker()
            .start_container(id, None::<bollard::query_parameters::StartContainerOptions>)
            .await
        {
            let _ = self.remove_container(id).await;
            return Err(e).doing(action);
        }
        Ok(())
    }

    /// Attaches to a created container's standard output and error (as
    /// `docker run` does before it starts one), so nothing its main process
    /// writes is missed.
    pub async fn attach_output(&self, container: &str) -> Result<Attached, EngineError> {
        let opts = bollard::query_parameters::AttachContainerOptions {
            stream: true,
            stdout: true,
            stderr: true,
            ..Default::default()
        };
        let attached = self
            .docker()
            .attach_container(container, Some(opts))
            .await
            .doing(|| format!("attaching to container {}", short(container)))?;
        Ok(Attached {
            container: container.to_string(),
            output: attached.output,
            _input: attached.input,
        })
    }

    /// Waits for a container's main process to end; its exit code.
    pub async fn wait_exit(&self, container: &str) -> Result<i64, EngineError> {
        let mut waits = self.docker().wait_container(
            container,
            None::<bollard::query_parameters::WaitContainerOptions>,
        );
        match waits.next().await {
            Some(Ok(r)) => Ok(r.status_code),
            // bollard reports a non-zero exit as an error carrying the code.
            Some(Err(bollard::errors::Error::DockerContainerWaitError { code, .. })) => Ok(code),
            Some(Err(e)) => Err(e).doing(|| format!("waiting for container {}", short(container))),
            None => Err(EngineError::failed(
                format!("waiting for container {}", short(container)),
                "the engine closed the wait without a result",
            )),
        }
    }

    /// Runs `cmd` in a running container, streaming stdout and stderr (merged,
    /// in arrival order) to `sink`. Gives up after `limit`, leaving the
    /// process running: the caller kills the container.
    pub async fn exec(
        &self,
        container: &str,
        cmd: Vec<String>,
        env: Vec<String>,
        sink: &mut (dyn FnMut(&[u8]) + Send),
        limit: Option<Duration>,
    ) -> Result<ExecOutcome, EngineError> {
        let what = describe(&cmd);
        let action = || format!("running `{what}` in container {}", short(container));
        let exec = self
            .docker()
            .create_exec(
                container,
                ExecConfig {
                    cmd: Some(cmd.clone()),
                    env: Some(env),
                    attach_stdout: Some(true),
                    attach_stderr: Some(true),
                    ..Default::default()
                },
            )
            .await
            .doing(action)?;
        let started = self
            .docker()
            .start_exec(&exec.id, Some(StartExecOptions::default()))
            .await
            .doing(action)?;
        let StartExecResults::Attached { mut output, .. } = started else {
            return Err(EngineError::failed(action(), "exec started detached"));
        };
        let pump = async {
            while let Some(chunk) = output.next().await {
                let chunk = chunk.doing(action)?;
                sink(&chunk.into_bytes());
            }
            Ok::<(), EngineError>(())
        };
        match limit {
            Some(l) => match tokio::time::timeout(l, pump).await {
                Ok(r) => r?,
                Err(_) => return Ok(ExecOutcome::TimedOut),
            },
            None => pump.await?,
        }
        let inspect = self.docker().inspect_exec(&exec.id).await.doing(action)?;
        Ok(ExecOutcome::Exited(inspect.exit_code.unwrap_or(-1)))
    }

    /// Creates (does not start) a container of `image`, to copy files out of it.
    pub async fn create_stopped(&self, image: &str, name: &str) -> Result<String, EngineError> {
        let body = ContainerCreateBody {
            image: Some(image.to_string()),
            cmd: Some(vec!["true".into()]),
            labels: Some(self.labelled(&crate::engine::labels::owner_labels("inspect", "inspect"))),
            ..Default::default()
        };
        let opts = CreateContainerOptions {
            name: Some(name.to_string()),
            ..Default::default()
        };
        let created = self
            .docker()
            .create_container(Some(opts), body)
            .await
            .doing(|| format!("creating a container of {image} to read its files"))?;
        Ok(created.id)
    }

    /// Runs a short command and returns its exit code and output.
    pub async fn exec_capture(
        &self,
        container: &str,
        cmd: &[&str],
    ) -> Result<(i64, String), EngineError> {
        let mut out = Vec::new();
        let outcome = self
            .exec(
                container,
                cmd.iter().map(|s| s.to_string()).collect(),
                Vec::new(),
                &mut |b: &[u8]| out.extend_from_slice(b),
                Some(Duration::from_secs(120)),
            )
            .await?;
        let code = match outcome {
            ExecOutcome::Exited(c) => c,
            ExecOutcome::TimedOut => -1,
        };
        Ok((code, String::from_utf8_lossy(&out).into_owned()))
    }

    /// Whether the engine saw the container's memory limit kill a process.
    pub async fn oom_killed(&self, container: &str) -> Result<bool, EngineError> {
        let action = || format!("inspecting container {}", short(container));
        let i = self
            .within(action, async {
                self.docker()
                    .inspect_container(
                        container,
                        None::<bollard::query_parameters::InspectContainerOptions>,
                    )
                    .await
                    .doing(action)
            })
            .await?;
        Ok(i.state.and_then(|s| s.oom_killed).unwrap_or(false))
    }

    pub async fn kill_container(&self, container: &str) -> Result<(), EngineError> {
        let opts = KillContainerOptions {
            signal: "KILL".into(),
        };
        let action = || format!("killing container {}", short(container));
        self.within(action, async {
            match self.docker().kill_container(container, Some(opts)).await {
                Ok(()) => Ok(()),
                Err(bollard::errors::Error::DockerResponseServerError {
                    status_code: 404 | 409,
                    ..
                }) => Ok(()),
                Err(e) => Err(e).doing(action),
            }
        })
        .await
    }

    /// Removes a container, running or not; a missing one is not an error.
    pub async fn remove_container(&self, container: &str) -> Result<(), EngineError> {
        let opts = RemoveContainerOptions {
            force: true,
            v: true,
            ..Default::default()
        };
        let action = || format!("removing container {}", short(container));
        self.within(action, async {
            match self.docker().remove_container(container, Some(opts)).await {
                Ok(()) => Ok(()),
                Err(bollard::errors::Error::DockerResponseServerError {
                    status_code: 404, ..
                }) => Ok(()),
                // "removal already in progress"
                Err(bollard::errors::Error::DockerResponseServerError {
                    status_code: 409, ..
                }) => Ok(()),
                Err(e) => Err(e).doing(action),
            }
        })
        .await
    }

    /// All containers (running or not) carrying `label` (`key` or `key=value`).
    pub async fn containers_with_label(
        &self,
        label: &str,
    ) -> Result<Vec<LabelledContainer>, EngineError> {
        let opts = ListContainersOptions {
            all: true,
            filters: super::label_filter(label),
            ..Default::default()
        };
        let action = || format!("listing containers labelled {label}");
        let list = self
            .within(action, async {
                self.docker()
                    .list_containers(Some(opts))
                    .await
                    .doing(action)
            })
            .await?;
        Ok(list
            .into_iter()
            .map(|c| LabelledContainer {
                id: c.id.unwrap_or_default(),
                names: c.names.unwrap_or_default(),
                labels: c.labels.unwrap_or_default(),
                state: c.state.map(|s| s.to_string()).unwrap_or_default(),
            })
            .collect())
    }

    /// Unpacks a tar archive into `dir` inside the container.
    pub async fn upload(
        &self,
        container: &str,
        dir: &str,
        tar: Vec<u8>,
    ) -> Result<(), EngineError> {
        let opts = UploadToContainerOptions {
            path: dir.to_string(),
            ..Default::default()
        };
        self.docker()
            .upload_to_container(container, Some(opts), bollard::body_full(tar.into()))
            .await
            .doing(|| format!("copying files into {dir} of container {}", short(container)))
    }

    /// [`Engine::upload`] of a tar archive read as it streams in (an error
    /// in the stream fails the upload).
    pub async fn upload_stream(
        &self,
        container: &str,
        dir: &str,
        tar: impl futures_util::Stream<Item = Result<bytes::Bytes, std::io::Error>> + Send + 'static,
    ) -> Result<(), EngineError> {
        let opts = UploadToContainerOptions {
            path: dir.to_string(),
            ..Default::default()
        };
        self.docker()
            .upload_to_container(container, Some(opts), bollard::body_try_stream(tar))
            .await
            .doing(|| format!("copying files into {dir} of container {}", short(container)))
    }

    /// Copies `path` out of the container as a tar archive into `dest`,
    /// refusing archives larger than `max_bytes`. Returns the archive's size.
    pub async fn download(
        &self,
        container: &str,
        path: &str,
        dest: &Path,
        max_bytes: u64,
    ) -> Result<u64, EngineError> {
        let action = || format!("copying {path} out of container {}", short(container));
        let opts = DownloadFromContainerOptions {
            path: path.to_string(),
        };
        let mut stream = self.docker().download_from_container(container, Some(opts));
        let mut file = tokio::fs::File::create(dest)
            .await
            .map_err(|e| EngineError::failed(action(), format!("{}: {e}", dest.display())))?;
        let mut total = 0u64;
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.doing(action)?;
            total += chunk.len() as u64;
            if total > max_bytes {
                return Err(EngineError::failed(
                    action(),
                    format!("the archive is larger than the limit of {max_bytes} bytes"),
                ));
            }
            file.write_all(&chunk)
                .await
                .map_err(|e| EngineError::failed(action(), format!("{}: {e}", dest.display())))?;
        }
        file.flush()
            .await
            .map_err(|e| EngineError::failed(action(), e.to_string()))?;
        Ok(total)
    }
}

/// `cmd` on one line for messages, each long argument (an inline script)
/// cut short.
fn describe(cmd: &[String]) -> String {
    const LONGEST: usize = 60;
    cmd.iter()
        .map(|a| {
            let short = match a.char_indices().nth(LONGEST) {
                Some((cut, _)) => format!("{}…", &a[..cut]),
                None => a.clone(),
            };
            short.replace('\n', " ")
        })
        .collect::<Vec<_>>()
        .join(" ")
}

impl Engine {
    /// Commits a container as image `reference` with `labels`.
    pub async fn commit(
        &self,
        container: &str,
        reference: &str,
        labels: HashMap<String, String>,
    ) -> Result<String, EngineError> {
        let (repo, tag) = super::image::split_reference(reference);
        let opts = bollard::query_parameters::CommitContainerOptions {
            container: Some(container.to_string()),
            repo: Some(repo.to_string()),
            tag: Some(tag.to_string()),
            pause: true,
            ..Default::default()
        };
        let config = bollard::models::ContainerConfig {
            labels: Some(self.labelled(&labels)),
            ..Default::default()
        };
        let id = self
            .docker()
            .commit_container(opts, config)
            .await
            .doing(|| format!("committing container {} as {reference}", short(container)))?;
        if self.flavour() == super::Flavour::Podman {
            // Podman (4.3) takes no labels from the commit's config: the
            // snapshot would keep the environment's `rocmatrix.kind=env`.
            return self.restyle(&id.id, reference, &[], labels).await;
        }
        Ok(id.id)
    }

    /// Runs `cmd` in the container on this process's terminal, through the
    /// docker CLI (`docker exec -it`): attaching standard input through the
    /// API hangs on Docker 20.10 with bollard 0.21, so a terminal session is
    /// the one thing handed to the CLI. Returns the exit code.
    pub async fn exec_terminal(
        &self,
        container: &str,
        cmd: &[String],
        env: &[String],
    ) -> Result<i64, EngineError> {
        let action = || format!("opening a terminal in container {}", short(container));
        let mut c = tokio::process::Command::new("docker");
        c.arg("exec").arg("-it");
        for e in env {
            c.arg("-e").arg(e);
        }
        c.arg(container).args(cmd);
        if let super::Address::Unix(p) = &self.address {
            c.env("DOCKER_HOST", format!("unix://{}", p.display()));
        }
        let status = c.status().await.map_err(|e| {
            EngineError::failed(action(), format!("cannot run the docker CLI: {e}"))
        })?;
        Ok(i64::from(status.code().unwrap_or(-1)))
    }
}

#[cfg(test)]
mod tests {
    use super::describe;

    #[test]
    fn a_long_inline_script_is_cut_short_in_messages() {
        let script = format!("echo one\n{}", "x".repeat(200_000));
        let cmd = ["bash", "-c", script.as_str(), "/rocmatrix/steps/01-a.sh"].map(String::from);
        let text = describe(&cmd);
        assert!(text.starts_with("bash -c echo one xxx"), "{text}");
        assert!(text.ends_with("… /rocmatrix/steps/01-a.sh"), "{text}");
        assert!(text.len() < 200, "{text}");
        assert_eq!(describe(&["true".to_string()]), "true");
    }
}
