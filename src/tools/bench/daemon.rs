//! The daemon under load: `holmes serve` started as a child process on loopback with a
//! benchmark's configuration, so that its CPU time and resident memory are its own and not the
//! simulated monitors'. Read through `/proc/<pid>` and the daemon's own `/metrics`.
//!
//! Used by [`bench`](super); talks to the daemon over HTTP (hyper's client) only.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use super::BenchError;
use super::prom::Scrape;
use crate::config::Config;

/// A running `holmes serve` child.
pub(crate) struct Daemon {
    child: Child,
    pub(crate) addr: std::net::SocketAddr,
    http: Client<HttpConnector, Empty<Bytes>>,
}

impl Daemon {
    /// Writes `cfg` into `dir`, starts the daemon on a free loopback port and waits (up to
    /// `ready_within`) until its API answers, i.e. its models are loaded and warm.
    pub(crate) async fn start(
        mut cfg: Config,
        dir: &Path,
        ready_within: Duration,
    ) -> Result<Daemon, BenchError> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        cfg.server.listen = ([127, 0, 0, 1], port).into();
        let path = dir.join("holmes.toml");
        let text = toml::to_string(&cfg).map_err(|e| BenchError::Config(e.to_string()))?;
        std::fs::write(&path, text)?;
        let log = std::fs::File::create(dir.join("daemon.log"))?;
        let child = Command::new(std::env::current_exe()?)
            .args(["serve", "--config"])
            .arg(&path)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()?;
        let mut d = Daemon {
            child,
            addr: cfg.server.listen,
            http: Client::builder(TokioExecutor::new()).build_http(),
        };
        let t0 = Instant::now();
        loop {
            if let Some(status) = d.child.try_wait()? {
                let log = std::fs::read_to_string(dir.join("daemon.log")).unwrap_or_default();
                return Err(BenchError::DaemonExited(status.to_string(), tail(&log)));
            }
            if d.get("/health/ready").await.is_ok() {
                return Ok(d);
            }
            if t0.elapsed() > ready_within {
                d.child.kill()?;
                return Err(BenchError::NotReady(ready_within.as_secs()));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// GET `path` from the daemon; the body as text.
    pub(crate) async fn get(&self, path: &str) -> Result<String, BenchError> {
        let uri: axum::http::Uri = format!("http://{}{path}", self.addr)
            .parse()
            .map_err(|e: axum::http::uri::InvalidUri| BenchError::Http(e.to_string()))?;
        let resp = self
            .http
            .get(uri)
            .await
            .map_err(|e| BenchError::Http(e.to_string()))?;
        let status = resp.status();
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| BenchError::Http(e.to_string()))?
            .to_bytes();
        if !status.is_success() {
            return Err(BenchError::Http(format!("GET {path}: {status}")));
        }
        Ok(String::from_utf8_lossy(&body).into_owned())
    }

    /// The daemon's metrics now.
    pub(crate) async fn scrape(&self) -> Result<Scrape, BenchError> {
        Ok(Scrape::parse(&self.get("/metrics").await?))
    }

    /// CPU seconds (user + system) the daemon has used so far.
    pub(crate) fn cpu_seconds(&self) -> f64 {
        proc_cpu_seconds(self.pid())
    }

    /// (current, peak) resident memory in MB.
    pub(crate) fn rss_mb(&self) -> (f64, f64) {
        let mb = |key| status_kb(self.pid(), key) / 1024.0;
        (mb("VmRSS:"), mb("VmHWM:"))
    }

    /// SIGTERM, then waits for the daemon's graceful exit (SIGKILL after `within`).
    pub(crate) async fn stop(mut self, within: Duration) -> Result<(), BenchError> {
        let pid = nix::unistd::Pid::from_raw(self.pid() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let t0 = Instant::now();
        while t0.elapsed() < within {
            if self.child.try_wait()?.is_some() {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        self.child.kill()?;
        self.child.wait()?;
        Ok(())
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        // A benchmark that fails half way must not leave a daemon behind.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A `kB` field of `/proc/<pid>/status` (`VmRSS:`, `VmHWM:`); 0 when unreadable.
pub(crate) fn status_kb(pid: u32, key: &str) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0.0)
}

/// utime + stime of a process, seconds (clock ticks are 100 Hz on Linux).
pub(crate) fn proc_cpu_seconds(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let rest = s.rsplit(')').next()?.split_whitespace().collect::<Vec<_>>();
            Some((rest.get(11)?.parse::<f64>().ok()? + rest.get(12)?.parse::<f64>().ok()?) / 100.0)
        })
        .unwrap_or(0.0)
}

fn tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    // A start-up error is printed as `Error: ...` (a panic as `thread ... panicked at`), and
    // under RUST_BACKTRACE a backtrace follows it that would fill the last lines: the tail
    // starts at the error then, or earlier where the last lines hold it anyway.
    let last = lines.len().saturating_sub(15);
    let from = lines
        .iter()
        .rposition(|l| l.starts_with("Error: ") || l.contains("panicked at"))
        .map_or(last, |e| e.min(last));
    let end = lines.len().min(from + 15);
    lines[from..end].join("\n")
}

#[cfg(test)]
mod tests {
    use super::tail;

    #[test]
    fn the_tail_of_a_failed_start_begins_at_its_error() {
        let mut log: Vec<String> = (0..30).map(|i| format!("INFO line {i}")).collect();
        assert_eq!(tail(&log.join("\n")).lines().count(), 15);
        assert!(tail(&log.join("\n")).ends_with("INFO line 29"));
        log.push("Error: ensemble member \"x\" is not in models".into());
        log.push(String::new());
        log.push("Stack backtrace:".into());
        log.extend((0..40).map(|i| format!("  {i}: frame")));
        let t = tail(&log.join("\n"));
        assert!(t.starts_with("Error: ensemble member"), "{t}");
        assert_eq!(t.lines().count(), 15);
        // An error among the last lines keeps the lines before it.
        let short = [
            "INFO a",
            "WARN why",
            "Error: it failed",
            "",
            "Stack backtrace:",
        ]
        .join("\n");
        assert_eq!(tail(&short), short);
        // A panic is found as an error is.
        let mut panicked: Vec<String> = vec!["thread 'main' panicked at src/x.rs:1:1:".into()];
        panicked.extend((0..40).map(|i| format!("  {i}: frame")));
        assert!(tail(&panicked.join("\n")).starts_with("thread 'main' panicked"));
    }
}
