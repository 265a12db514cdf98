//! The package download cache: the `.deb` files one image build or
//! debootstrap downloads serve every later one, in this run and the next
//! (`<cache>/downloads/<host>/<path of the file on the mirror>`).
//!
//! It is a small HTTP/1.1 forward proxy inside rocmatrix rather than
//! apt-cacher-ng: it lives exactly as long as the run (Ctrl-C and SIGKILL
//! included, there is no process to leave behind), needs nothing installed,
//! listens on an ephemeral port so that runs at once never collide, and
//! runs at once share the one directory safely because every file is
//! written under a private name and renamed into place. apt and debootstrap
//! reach it through `http_proxy`, set only for the build (a predefined build
//! argument, which the engine keeps out of the image's config and history)
//! or for the debootstrap process: nothing in an image changes, and neither
//! does the lock.
//!
//! Only `GET`s of files that never change and answer 200 are stored: `.deb`
//! and `.udeb` files (pool file names carry the version) and the package
//! indexes apt fetches by hash (`…/by-hash/SHA256/<hash>`); apt and
//! debootstrap check every file against the hashes of the signed indexes.
//! Everything else (`InRelease`, indexes by name, whatever a `setup:` script
//! fetches) passes through. Targets on the host's loopback are forwarded only for clients
//! on the loopback listener, so a container on the bridge cannot use the
//! proxy to reach the host's local services.

use std::collections::HashMap;
use std::convert::Infallible;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Frame, Incoming};
use hyper::header::{HeaderMap, HeaderValue, CONTENT_LENGTH, HOST};
use hyper::{Method, Request, Response, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::engine::Engine;

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Body = BoxBody<Bytes, BoxError>;

/// Set to `off` to build and bootstrap without the cache.
pub const SWITCH_ENV: &str = "ROCMATRIX_PACKAGE_CACHE";

/// Downloads in progress, `<pid>-<n>`, renamed into place when complete.
/// Cached paths never have a segment starting with a dot.
const PARTIAL: &str = ".partial";

/// How long connecting to a mirror may take.
const CONNECT_LIMIT: Duration = Duration::from_secs(20);

/// The cache's directory: `downloads/` under the cache directory.
pub fn dir() -> PathBuf {
    crate::dirs::cache_dir().join("downloads")
}

/// Whether the user turned the cache off (`ROCMATRIX_PACKAGE_CACHE=off`).
pub fn switched_off() -> bool {
    std::env::var(SWITCH_ENV).is_ok_and(|v| matches!(v.as_str(), "off" | "0" | "false" | "no"))
}

/// Removes the downloads in progress that processes now gone left.
fn remove_stale_partials(partial: &Path) {
    let Ok(entries) = std::fs::read_dir(partial) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let pid = name.split('-').next().and_then(|p| p.parse::<u32>().ok());
        if pid
            .is_some_and(|p| p != std::process::id() && !Path::new(&format!("/proc/{p}")).exists())
        {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// Removes everything under `dir` (the cache's directory); the number of
/// files and their bytes. A run using the cache meanwhile only misses the
/// files it would have found or stored.
pub fn clear(dir: &Path) -> std::io::Result<(u64, u64)> {
    fn walk(d: &Path, files: &mut u64, bytes: &mut u64) -> std::io::Result<()> {
        for e in std::fs::read_dir(d)? {
            let e = e?;
            let t = e.file_type()?;
            if t.is_dir() {
                walk(&e.path(), files, bytes)?;
                std::fs::remove_dir(e.path())?;
            } else {
                *bytes += e.metadata().map(|m| m.len()).unwrap_or(0);
                *files += 1;
                std::fs::remove_file(e.path())?;
            }
        }
        Ok(())
    }
    let (mut files, mut bytes) = (0, 0);
    match walk(dir, &mut files, &mut bytes) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !dir.exists() => Ok((0, 0)),
        other => other.map(|()| (files, bytes)),
    }
}

/// What the cache did so far.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    /// Package files served from the cache.
    pub hits: u64,
    /// Package files downloaded and stored.
    pub stored: u64,
    /// Requests passed through without being stored.
    pub passed: u64,
}

struct State {
    dir: PathBuf,
    hits: AtomicU64,
    stored: AtomicU64,
    passed: AtomicU64,
    seq: AtomicU64,
    /// One line per package file: `hit <url>` or `stored <url>`.
    log: Mutex<Option<std::fs::File>>,
}

impl State {
    fn note(&self, what: &str, uri: &Uri) {
        let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(f) = log.as_mut() {
            let _ = writeln!(f, "{what} {uri}");
        }
    }
}

/// Why builds on a network cannot use the cache.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct Unreachable(String);

/// A running cache. Dropping it stops its listeners and open connections.
pub struct AptCache {
    state: Arc<State>,
    loopback: SocketAddr,
    listeners: Mutex<Vec<JoinHandle<()>>>,
    /// Per build network: the proxy URL builds on it use, or why they cannot.
    routes: tokio::sync::Mutex<HashMap<Option<String>, Result<String, Unreachable>>>,
}

impl Drop for AptCache {
    fn drop(&mut self) {
        for l in self
            .listeners
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            l.abort();
        }
    }
}

impl AptCache {
    /// Starts the cache over `dir`, listening on loopback; `log` (if any)
    /// receives a line per package file served or stored.
    pub async fn start(dir: PathBuf, log: Option<&Path>) -> std::io::Result<AptCache> {
        let partial = dir.join(PARTIAL);
        tokio::fs::create_dir_all(&partial).await?;
        let _ = tokio::task::spawn_blocking(move || remove_stale_partials(&partial)).await;
        let log = match log {
            Some(p) => Some(
                tokio::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)
                    .await?
                    .into_std()
                    .await,
            ),
            None => None,
        };
        let state = Arc::new(State {
            dir,
            hits: AtomicU64::new(0),
            stored: AtomicU64::new(0),
            passed: AtomicU64::new(0),
            seq: AtomicU64::new(0),
            log: Mutex::new(log),
        });
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let loopback = listener.local_addr()?;
        let task = tokio::spawn(serve(listener, state.clone(), true));
        Ok(AptCache {
            state,
            loopback,
            listeners: Mutex::new(vec![task]),
            routes: tokio::sync::Mutex::new(HashMap::new()),
        })
    }

    /// The proxy URL for processes on this host (debootstrap).
    pub fn loopback_proxy(&self) -> String {
        format!("http://{}", self.loopback)
    }

    pub fn dir(&self) -> &Path {
        &self.state.dir
    }

    pub fn stats(&self) -> Stats {
        Stats {
            hits: self.state.hits.load(Ordering::Relaxed),
            stored: self.state.stored.load(Ordering::Relaxed),
            passed: self.state.passed.load(Ordering::Relaxed),
        }
    }

    /// The proxy URL that builds on `network_mode` (the default bridge when
    /// `None`) reach, decided once per network: on the bridge the cache
    /// also listens on the network's gateway, and a container started from
    /// `image` must reach it. `Err` says why builds on it go without the
    /// cache; it is returned only the first time, later calls give `Ok(None)`.
    pub async fn proxy_for(
        &self,
        engine: &Engine,
        image: &str,
        network_mode: Option<&str>,
    ) -> Result<Option<String>, Unreachable> {
        let mut routes = self.routes.lock().await;
        let key = network_mode.map(str::to_string);
        if let Some(r) = routes.get(&key) {
            return Ok(r.clone().ok());
        }
        let route = self.route(engine, image, network_mode).await;
        routes.insert(key, route.clone());
        route.map(Some)
    }

    async fn route(
        &self,
        engine: &Engine,
        image: &str,
        network_mode: Option<&str>,
    ) -> Result<String, Unreachable> {
        let why = |s: String| Unreachable(s);
        let addr = match network_mode {
            Some("host") => self.loopback,
            other => {
                let net = other.unwrap_or("bridge");
                let gateway = engine
                    .network_gateway(net)
                    .await
                    .map_err(|e| why(e.to_string()))?
                    .ok_or_else(|| {
                        why(format!(
                            "the engine names no IPv4 gateway for network {net}"
                        ))
                    })?;
                self.listen(gateway)
                    .await
                    .map_err(|e| why(format!("cannot listen on {gateway}: {e}")))?
            }
        };
        let (host, port) = (addr.ip().to_string(), addr.port());
        match super::network::reaches(engine, image, network_mode, &host, port).await {
            Ok(true) => Ok(format!("http://{addr}")),
            Ok(false) => Err(why(format!("a container on it cannot reach {addr}"))),
            Err(e) => Err(why(format!("probing it failed: {e}"))),
        }
    }

    async fn listen(&self, ip: IpAddr) -> std::io::Result<SocketAddr> {
        let listener = TcpListener::bind((ip, 0)).await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(serve(listener, self.state.clone(), ip.is_loopback()));
        self.listeners
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(task);
        Ok(addr)
    }
}

/// `http_proxy` and `HTTP_PROXY` set to `proxy`, as build arguments or
/// environment variables.
pub fn proxy_vars(proxy: &str) -> HashMap<String, String> {
    ["http_proxy", "HTTP_PROXY"]
        .iter()
        .map(|k| (k.to_string(), proxy.to_string()))
        .collect()
}

/// Accepts connections until the task is aborted; aborting drops the
/// connections too.
async fn serve(listener: TcpListener, state: Arc<State>, local: bool) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            Err(_) => {
                // Out of descriptors, say: try again shortly.
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let state = state.clone();
        connections.spawn(async move {
            let service = hyper::service::service_fn(move |req| handle(state.clone(), local, req));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
        while connections.try_join_next().is_some() {}
    }
}

async fn handle(
    state: Arc<State>,
    local: bool,
    req: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    Ok(match forward(&state, local, req).await {
        Ok(r) => r,
        Err((status, text)) => {
            let mut r = Response::new(
                Full::new(Bytes::from(format!("rocmatrix package cache: {text}\n")))
                    .map_err(|never| match never {})
                    .boxed(),
            );
            *r.status_mut() = status;
            r
        }
    })
}

type Refusal = (StatusCode, String);

async fn forward(
    state: &Arc<State>,
    local: bool,
    req: Request<Incoming>,
) -> Result<Response<Body>, Refusal> {
    if req.method() == Method::CONNECT {
        return Err((
            StatusCode::METHOD_NOT_ALLOWED,
            "no tunnels (CONNECT)".into(),
        ));
    }
    let uri = req.uri().clone();
    if uri.scheme_str() != Some("http") {
        return Err((
            StatusCode::BAD_REQUEST,
            format!("not an http:// URL: {uri}"),
        ));
    }
    let host = uri
        .host()
        .ok_or_else(|| (StatusCode::BAD_REQUEST, format!("no host in {uri}")))?
        .to_ascii_lowercase();
    let port = uri.port_u16().unwrap_or(80);
    let key = (req.method() == Method::GET && uri.query().is_none())
        .then(|| cache_path(&state.dir, &host, port, uri.path()))
        .flatten();
    if let Some(path) = &key {
        if let Some(r) = cached(path).await {
            state.hits.fetch_add(1, Ordering::Relaxed);
            state.note("hit", &uri);
            return Ok(r);
        }
    }
    let upstream = connect(&host, port, local).await?;
    let bad_gateway = |e: hyper::Error| (StatusCode::BAD_GATEWAY, format!("{host}:{port}: {e}"));
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(upstream))
        .await
        .map_err(bad_gateway)?;
    tokio::spawn(conn);
    let (mut parts, body) = req.into_parts();
    parts.uri = uri
        .path_and_query()
        .map(|pq| pq.as_str())
        .unwrap_or("/")
        .parse()
        .map_err(|e| (StatusCode::BAD_REQUEST, format!("{uri}: {e}")))?;
    strip_hop_by_hop(&mut parts.headers);
    if let Some(authority) = uri.authority() {
        if let Ok(v) = HeaderValue::from_str(authority.as_str()) {
            parts.headers.insert(HOST, v);
        }
    }
    let response = sender
        .send_request(Request::from_parts(parts, body))
        .await
        .map_err(bad_gateway)?;
    let (mut parts, body) = response.into_parts();
    strip_hop_by_hop(&mut parts.headers);
    match key {
        Some(path) if parts.status == StatusCode::OK => {
            let expected = parts
                .headers
                .get(CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
            let (tx, rx) = mpsc::channel(16);
            tokio::spawn(tee(state.clone(), body, path, expected, tx, uri));
            Ok(Response::from_parts(parts, Channel(rx).boxed()))
        }
        _ => {
            state.passed.fetch_add(1, Ordering::Relaxed);
            Ok(Response::from_parts(
                parts,
                body.map_err(BoxError::from).boxed(),
            ))
        }
    }
}

/// Where the file at `path` on `host:port` is kept, if it never changes:
/// a package (`….deb`, `….udeb`: pool names carry the version) or an index
/// that apt fetches by its hash (`…/by-hash/SHA256/<hash>`). Plain path
/// segments only.
fn cache_path(dir: &Path, host: &str, port: u16, path: &str) -> Option<PathBuf> {
    let by_hash = path.rsplit('/').nth(2).is_some_and(|d| d == "by-hash");
    if !(path.ends_with(".deb") || path.ends_with(".udeb") || by_hash) {
        return None;
    }
    let plain = |s: &str, extra: &str| {
        !s.is_empty()
            && !s.starts_with('.')
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || ".-_".contains(c) || extra.contains(c))
    };
    if !plain(host, "") {
        return None;
    }
    let mut p = dir.join(match port {
        80 => host.to_string(),
        p => format!("{host}_{p}"),
    });
    for segment in path.split('/').filter(|s| !s.is_empty()) {
        if !plain(segment, "+~%") {
            return None;
        }
        p.push(segment);
    }
    Some(p)
}

/// A 200 response with the stored file at `path`, if there is one.
async fn cached(path: &Path) -> Option<Response<Body>> {
    let mut file = tokio::fs::File::open(path).await.ok()?;
    let meta = file.metadata().await.ok()?;
    if !meta.is_file() {
        return None;
    }
    let (tx, rx) = mpsc::channel::<Result<Frame<Bytes>, BoxError>>(4);
    tokio::spawn(async move {
        let mut buf = vec![0u8; 256 * 1024];
        loop {
            let frame = match file.read(&mut buf).await {
                Ok(0) => return,
                Ok(n) => Ok(Frame::data(Bytes::copy_from_slice(&buf[..n]))),
                Err(e) => Err(BoxError::from(e)),
            };
            let failed = frame.is_err();
            if tx.send(frame).await.is_err() || failed {
                return;
            }
        }
    });
    let mut r = Response::new(Channel(rx).boxed());
    r.headers_mut()
        .insert(CONTENT_LENGTH, HeaderValue::from(meta.len()));
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        HeaderValue::from_static("application/vnd.debian.binary-package"),
    );
    Some(r)
}

/// Streams `body` to the client and into a private file under
/// [`PARTIAL`], renamed to `path` once the whole body (as long as
/// announced) arrived.
/// The download goes on if the client leaves, so the next one finds it.
async fn tee(
    state: Arc<State>,
    mut body: Incoming,
    path: PathBuf,
    expected: Option<u64>,
    tx: mpsc::Sender<Result<Frame<Bytes>, BoxError>>,
    uri: Uri,
) {
    let part = state.dir.join(PARTIAL).join(format!(
        "{}-{}",
        std::process::id(),
        state.seq.fetch_add(1, Ordering::Relaxed)
    ));
    let mut file = match path.parent() {
        Some(dir) if tokio::fs::create_dir_all(dir).await.is_ok() => {
            tokio::fs::File::create(&part).await.ok()
        }
        _ => None,
    };
    let (mut got, mut complete, mut client) = (0u64, true, true);
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(frame) => {
                if let Some(data) = frame.data_ref() {
                    got += data.len() as u64;
                    if let Some(f) = file.as_mut() {
                        if f.write_all(data).await.is_err() {
                            file = None;
                        }
                    }
                }
                if client && tx.send(Ok(frame)).await.is_err() {
                    client = false;
                }
            }
            Err(e) => {
                complete = false;
                if client {
                    let _ = tx.send(Err(e.into())).await;
                }
                break;
            }
        }
    }
    drop(tx);
    let whole = complete && expected.is_none_or(|n| n == got);
    let kept = match file {
        Some(mut f) if whole => {
            f.flush().await.is_ok() && {
                drop(f);
                tokio::fs::rename(&part, &path).await.is_ok()
            }
        }
        _ => false,
    };
    if kept {
        state.stored.fetch_add(1, Ordering::Relaxed);
        state.note("stored", &uri);
    } else {
        state.passed.fetch_add(1, Ordering::Relaxed);
        let _ = tokio::fs::remove_file(&part).await;
    }
}

/// A TCP connection to `host:port`. Loopback targets only for `local`
/// clients.
async fn connect(host: &str, port: u16, local: bool) -> Result<TcpStream, Refusal> {
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
        .await
        .map_err(|e| {
            (
                StatusCode::BAD_GATEWAY,
                format!("cannot resolve {host}: {e}"),
            )
        })?
        .filter(|a| local || !(a.ip().is_loopback() || a.ip().is_unspecified()))
        .collect();
    if addrs.is_empty() {
        return Err((
            StatusCode::FORBIDDEN,
            format!("{host} is this host's loopback; not forwarded for containers"),
        ));
    }
    let mut last = String::new();
    for a in addrs {
        match tokio::time::timeout(CONNECT_LIMIT, TcpStream::connect(a)).await {
            Ok(Ok(s)) => return Ok(s),
            Ok(Err(e)) => last = e.to_string(),
            Err(_) => last = format!("no answer in {}s", CONNECT_LIMIT.as_secs()),
        }
    }
    Err((
        StatusCode::BAD_GATEWAY,
        format!("cannot connect to {host}:{port}: {last}"),
    ))
}

/// Removes the headers that belong to one connection, not to the message.
fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<String> = headers
        .get_all(hyper::header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(',').map(|s| s.trim().to_ascii_lowercase()))
        .collect();
    for h in [
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    ]
    .iter()
    .copied()
    .chain(named.iter().map(String::as_str))
    {
        headers.remove(h);
    }
}

/// A response body fed through a channel.
struct Channel(mpsc::Receiver<Result<Frame<Bytes>, BoxError>>);

impl hyper::body::Body for Channel {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        self.0.poll_recv(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_package_files_are_kept() {
        let d = Path::new("/c");
        assert_eq!(
            cache_path(
                d,
                "deb.debian.org",
                80,
                "/debian/pool/main/h/hipcc/hipcc_5.7.1-3_amd64.deb"
            ),
            Some(PathBuf::from(
                "/c/deb.debian.org/debian/pool/main/h/hipcc/hipcc_5.7.1-3_amd64.deb"
            ))
        );
        assert_eq!(
            cache_path(d, "m.example", 8080, "/pool/libstdc++6_14.2.0-19_amd64.deb"),
            Some(PathBuf::from(
                "/c/m.example_8080/pool/libstdc++6_14.2.0-19_amd64.deb"
            ))
        );
        assert_eq!(
            cache_path(d, "deb.debian.org", 80, "/debian/dists/sid/InRelease"),
            None
        );
        let by_name = "/debian/dists/sid/main/binary-amd64/Packages.xz";
        assert_eq!(cache_path(d, "deb.debian.org", 80, by_name), None);
        let by_hash = "/debian/dists/sid/main/binary-amd64/by-hash/SHA256/0a1b2c";
        assert_eq!(
            cache_path(d, "deb.debian.org", 80, by_hash),
            Some(PathBuf::from(format!("/c/deb.debian.org{by_hash}")))
        );
        assert_eq!(
            cache_path(d, "deb.debian.org", 80, "/debian/../../etc/x.deb"),
            None
        );
        assert_eq!(
            cache_path(d, "deb.debian.org", 80, "/debian/.hidden.deb"),
            None
        );
        assert_eq!(cache_path(d, "..", 80, "/x.deb"), None);
    }

    /// A mirror on loopback that serves one package file and counts requests.
    async fn mirror(body: &'static [u8]) -> (SocketAddr, Arc<AtomicU64>) {
        let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
        let addr = l.local_addr().unwrap();
        let count = Arc::new(AtomicU64::new(0));
        let c = count.clone();
        tokio::spawn(async move {
            loop {
                let (mut s, _) = l.accept().await.unwrap();
                c.fetch_add(1, Ordering::SeqCst);
                let mut head = Vec::new();
                let mut b = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && s.read(&mut b).await.unwrap() == 1 {
                    head.push(b[0]);
                }
                let r = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                s.write_all(r.as_bytes()).await.unwrap();
                s.write_all(body).await.unwrap();
            }
        });
        (addr, count)
    }

    async fn get(proxy: &str, url: &str) -> String {
        let mut s = TcpStream::connect(proxy.trim_start_matches("http://"))
            .await
            .unwrap();
        let req = format!("GET {url} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        s.write_all(req.as_bytes()).await.unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        out
    }

    #[tokio::test]
    async fn second_download_comes_from_the_cache() {
        let d = tempfile::tempdir().unwrap();
        // Left by a process that is gone (no pid is that large).
        let stale = d.path().join("downloads").join(PARTIAL).join("999999999-0");
        std::fs::create_dir_all(stale.parent().unwrap()).unwrap();
        std::fs::write(&stale, "half a package").unwrap();
        let (mirror, requests) = mirror(b"package bytes").await;
        let cache = AptCache::start(d.path().join("downloads"), Some(&d.path().join("log")))
            .await
            .unwrap();
        let url = format!("http://{mirror}/debian/pool/main/p/p_1.0_amd64.deb");
        let first = get(&cache.loopback_proxy(), &url).await;
        assert!(
            first.starts_with("HTTP/1.1 200") && first.ends_with("package bytes"),
            "{first}"
        );
        // The copy is renamed into place after the client had the last byte.
        for _ in 0..50 {
            if cache.stats().stored == 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let second = get(&cache.loopback_proxy(), &url).await;
        assert!(
            second.starts_with("HTTP/1.1 200") && second.ends_with("package bytes"),
            "{second}"
        );
        assert_eq!(requests.load(Ordering::SeqCst), 1);
        assert_eq!(
            cache.stats(),
            Stats {
                hits: 1,
                stored: 1,
                passed: 0
            }
        );
        let index = format!("http://{mirror}/debian/dists/sid/InRelease");
        assert!(get(&cache.loopback_proxy(), &index)
            .await
            .ends_with("package bytes"));
        assert_eq!(requests.load(Ordering::SeqCst), 2, "indexes are not kept");
        let log = std::fs::read_to_string(d.path().join("log")).unwrap();
        assert_eq!(log, format!("stored {url}\nhit {url}\n"));
        let stored = d.path().join(format!(
            "downloads/127.0.0.1_{}/debian/pool/main/p/p_1.0_amd64.deb",
            mirror.port()
        ));
        assert_eq!(std::fs::read(stored).unwrap(), b"package bytes");
        let partial = std::fs::read_dir(d.path().join("downloads").join(PARTIAL)).unwrap();
        assert_eq!(
            partial.count(),
            0,
            "the stale download is gone, the new one renamed"
        );
    }
}
