//! The appliance through the real binary: `holmes validate`, the systemd unit, the notify
//! protocol, graceful shutdown on SIGTERM, and a `kill -9` under load.

mod common;

use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use holmes::config::Config;

const BIN: &str = env!("CARGO_BIN_EXE_holmes");

/// The tests that start servers run one at a time: on a small CI machine two daemons and a
/// simulator at once would measure the machine, not the appliance.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn write_config(dir: &Path, cfg: &Config) -> PathBuf {
    let p = dir.join("holmes.toml");
    std::fs::write(&p, toml::to_string(cfg).unwrap()).unwrap();
    p
}

fn validate(args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("validate")
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap()
}

/// `holmes validate` on `cfg` (written into `dir`): whether it passed, and what it printed.
fn validate_config(dir: &Path, cfg: &Config) -> (bool, String) {
    let p = write_config(dir, cfg);
    let o = validate(&["--config", p.to_str().unwrap()]);
    (o.status.success(), text(&o))
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A zoo of the members the test configuration serves, in `dir`.
fn small_zoo(dir: &Path) -> PathBuf {
    let zoo = dir.join("zoo");
    for m in common::TEST_MEMBERS {
        common::copy_model(m, &zoo);
    }
    zoo
}

#[test]
fn validate_passes_a_good_config_and_names_each_problem() {
    let dir = tempfile::tempdir().unwrap();
    let zoo = small_zoo(dir.path());
    let mut cfg = common::test_config(dir.path());
    cfg.ensemble.models_dir = zoo.clone();
    cfg.storage.db = dir.path().join("state").join("holmes.db");
    let good = write_config(dir.path(), &cfg);
    let o = validate(&["--config", good.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let out = text(&o);
    let n = common::TEST_MEMBERS.len();
    assert!(
        out.contains(&format!("{n} model(s)")) && out.contains("will be created"),
        "{out}"
    );
    assert!(
        !dir.path().join("state").exists(),
        "validate creates nothing"
    );

    let body = std::fs::read_to_string(&good).unwrap();
    // A served member, to be named in errors.
    let member = common::TEST_MEMBERS[0];
    let fails = |name: &str, toml: String, expect: &[&str]| {
        let p = dir.path().join(name);
        std::fs::write(&p, toml).unwrap();
        let o = validate(&["--config", p.to_str().unwrap()]);
        let out = text(&o);
        assert!(!o.status.success(), "{name} passed: {out}");
        for e in expect {
            assert!(out.contains(e), "{name}: {e:?} not in {out}");
        }
    };
    fails(
        "unknown.toml",
        body.replace("[auth]", "[auth]\nsurprise = 1"),
        &["unknown.toml", "unknown field `surprise`"],
    );
    fails(
        "bad.toml",
        body.replace("min_coverage = 0.8", "min_coverage = 1.5"),
        &["quality.min_coverage must lie in [0, 1]"],
    );
    fails(
        "member.toml",
        body.replace(&format!("\"{member}\""), "\"no-such-model\""),
        &["ensemble.members: no-such-model is not in the zoo"],
    );

    // A corrupt weights file: the model and the member are both named.
    let weights = zoo.join(member).join("weights.mpk");
    let mut bytes = std::fs::read(&weights).unwrap();
    let n = bytes.len();
    bytes[n / 2] ^= 0xff;
    std::fs::write(&weights, bytes).unwrap();
    let o = validate(&["--config", good.to_str().unwrap()]);
    let out = text(&o);
    assert!(!o.status.success(), "{out}");
    assert!(
        out.contains(&format!("model {member}")) && out.contains("checksum mismatch"),
        "{out}"
    );
    assert!(
        out.contains(&format!("ensemble.members: {member} is in")) && out.contains("does not load"),
        "{out}"
    );
    // --models overrides the config's zoo: the committed one is whole.
    let models = common::root().join("models");
    let o = validate(&[
        "--config",
        good.to_str().unwrap(),
        "--models",
        models.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
}

/// The beat counter the config serves must load (the daemon would not start on one that does
/// not); the risk alarm rule the configured members would start on is named, with a warning
/// (the check still passes) where it is not validated for them or the zoo's rules do not read.
#[test]
fn validate_checks_the_beat_counter_and_names_the_alarm_rule() {
    let dir = tempfile::tempdir().unwrap();
    let run = |cfg: &Config| validate_config(dir.path(), cfg);
    // The committed zoo on the embedded defaults: the default members' rule is validated.
    let mut cfg = Config::default();
    cfg.storage.db = dir.path().join("holmes.db");
    cfg.ensemble.models_dir = common::root().join("models");
    let (ok, out) = run(&cfg);
    assert!(ok, "{out}");
    assert!(out.contains("beat counter: beats.json"), "{out}");
    assert!(
        out.contains("risk alarm of the configured members: on >=")
            && out.contains("validated for this ensemble"),
        "{out}"
    );
    assert!(!out.contains("warning:"), "{out}");

    // Members of the committed zoo with no rule of their own: a rule derived from the others'.
    let mut other = cfg.clone();
    other.ensemble.members = vec![
        "ecg-primary-5s-w8-d2".to_owned(),
        "ecg-secondary-10s-w8-d2".to_owned(),
    ];
    let (ok, out) = run(&other);
    assert!(ok, "{out}");
    assert!(
        out.contains("warning: risk alarm of the configured members: on >=")
            && out.contains("NOT validated: derived from the rules validated for other ensembles"),
        "{out}"
    );

    // Other members in a zoo with no counter and no rules: they serve, on the fallback.
    let zoo = small_zoo(dir.path());
    let mut cfg = common::test_config(dir.path());
    cfg.ensemble.models_dir = zoo.clone();
    let (ok, out) = run(&cfg);
    assert!(ok, "{out}");
    assert!(out.contains("beat counter: none in"), "{out}");
    assert!(
        out.contains("warning: risk alarm of the configured members: on >=")
            && out.contains("NOT validated: the config's fallback"),
        "{out}"
    );
    // A config the daemon would refuse is the error, with no word on its alarm.
    let mut bad = cfg.clone();
    bad.ward.hop_secs = 0;
    let (ok, out) = run(&bad);
    assert!(!ok && !out.contains("risk alarm"), "{out}");

    // A counter that does not read fails the check, as it would fail the start ...
    std::fs::write(zoo.join("beats.json"), "{\"classifier\": 1}").unwrap();
    let (ok, out) = run(&cfg);
    assert!(!ok, "{out}");
    assert!(
        out.contains("error: beat counter:") && out.contains("beats.json"),
        "{out}"
    );
    // ... unless the config counts no beats.
    cfg.ensemble.count_beats = false;
    let (ok, out) = run(&cfg);
    assert!(ok && out.contains("beat counter: off"), "{out}");

    // Rules that do not read: a warning; the daemon starts on the fallback.
    std::fs::write(zoo.join("alarm_rules.json"), "not json").unwrap();
    let (ok, out) = run(&cfg);
    assert!(ok, "{out}");
    assert!(
        out.contains("warning: the zoo's alarm rules do not read"),
        "{out}"
    );
}

/// `[server.tls]`'s certificate and key must read, as the daemon's start needs them.
#[test]
fn validate_checks_the_tls_certificate_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = common::test_config(dir.path());
    cfg.ensemble.models_dir = small_zoo(dir.path());
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    cfg.server.tls = Some(holmes::config::TlsConfig {
        cert: cert.clone(),
        key: key.clone(),
    });
    let run = || validate_config(dir.path(), &cfg);
    let (ok, out) = run();
    assert!(!ok, "{out}");
    assert!(
        out.contains("error: server.tls:") && out.contains("cert.pem"),
        "{out}"
    );
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    std::fs::write(&cert, ck.cert.pem()).unwrap();
    // A certificate without its key still fails ...
    std::fs::write(&key, "not a key").unwrap();
    let (ok, out) = run();
    assert!(!ok && out.contains("key.pem"), "{out}");
    // ... and with it passes.
    std::fs::write(&key, ck.signing_key.serialize_pem()).unwrap();
    let (ok, out) = run();
    assert!(ok && out.contains("tls: HTTPS"), "{out}");
}

/// `systemd-analyze verify` (and the offline security score) on the unit, with ExecStart and
/// ExecStartPre pointed at the binary under test. Skips, loudly, without systemd-analyze unless
/// `HOLMES_REQUIRE_SYSTEMD=1` (CI), where its absence fails.
#[test]
fn the_systemd_unit_verifies() {
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        assert!(
            std::env::var("HOLMES_REQUIRE_SYSTEMD").as_deref() != Ok("1"),
            "systemd-analyze not found and HOLMES_REQUIRE_SYSTEMD=1 (apt-get install systemd)"
        );
        println!("SKIPPED the_systemd_unit_verifies: systemd-analyze not found");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let unit = std::fs::read_to_string(common::root().join("systemd/holmes.service")).unwrap();
    for key in [
        "Type=notify",
        "WatchdogSec=",
        "ExecStartPre=/usr/bin/holmes validate --config /etc/holmes/holmes.toml",
        "StateDirectory=holmes",
        "MemoryDenyWriteExecute=yes",
        "SystemCallFilter=~@privileged @resources",
    ] {
        assert!(unit.contains(key), "{key} missing from the unit");
    }
    let path = dir.path().join("holmes.service");
    std::fs::write(&path, unit.replace("/usr/bin/holmes", BIN)).unwrap();
    let o = Command::new("systemd-analyze")
        .args(["verify", "--man=no", "--generators=no"])
        .arg(&path)
        .output()
        .unwrap();
    // verify exits 0 on unknown keys and bad values (it only warns): any output is a failure.
    assert!(
        o.status.success() && o.stderr.is_empty() && o.stdout.is_empty(),
        "{}",
        text(&o)
    );
    let o = Command::new("systemd-analyze")
        .args(["security", "--offline=yes", "--threshold=20"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(o.status.success(), "exposure above 2.0: {}", text(&o));
    let sysusers = std::fs::read_to_string(common::root().join("systemd/holmes.sysusers")).unwrap();
    assert!(sysusers.lines().any(|l| l.starts_with("u holmes ")));
}

/// `holmes serve` as a child process.
struct Daemon {
    child: Child,
    port: u16,
}

impl Daemon {
    fn start(config: &Path, env: &[(&str, &str)]) -> Daemon {
        let port = toml::from_str::<Config>(&std::fs::read_to_string(config).unwrap())
            .unwrap()
            .server
            .listen
            .port();
        let child = Command::new(BIN)
            .args(["serve", "--config"])
            .arg(config)
            .envs(env.iter().copied())
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        Daemon { child, port }
    }

    /// Status code of GET `path`, or `None` when the port does not answer.
    fn get(&self, path: &str) -> Option<(u16, String)> {
        http_get(self.port, path)
    }

    fn wait_ready(&mut self, secs: u64) {
        let until = Instant::now() + Duration::from_secs(secs);
        while self.get("/health/ready").map(|r| r.0) != Some(200) {
            assert!(
                self.child.try_wait().unwrap().is_none(),
                "the daemon exited"
            );
            assert!(Instant::now() < until, "the daemon is not ready");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own child's pid.
        let rc = unsafe { libc::kill(self.child.id() as i32, sig) };
        assert_eq!(rc, 0);
    }

    /// Waits for the exit; its status and how long it took.
    fn wait_exit(&mut self, secs: u64) -> (std::process::ExitStatus, Duration) {
        let t = Instant::now();
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return (s, t.elapsed());
            }
            if t.elapsed() > Duration::from_secs(secs) {
                let _ = self.child.kill();
                panic!("the daemon did not exit within {secs} s");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).ok()?;
    let status = buf.get(9..12)?.parse().ok()?;
    Some((status, buf))
}

/// The names of process `pid`'s threads, from `/proc`.
fn thread_names(pid: u32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|n| n.trim().to_string())
        .collect()
}

/// A config for a child daemon on a free port with its database in `dir`.
fn daemon_config(dir: &Path, edit: impl FnOnce(&mut Config)) -> PathBuf {
    let mut cfg = common::test_config(dir);
    cfg.server.listen = format!("127.0.0.1:{}", common::free_port())
        .parse()
        .unwrap();
    edit(&mut cfg);
    write_config(dir, &cfg)
}

#[test]
fn readiness_follows_warm_models_and_an_answering_port_and_the_watchdog_is_fed() {
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let config = daemon_config(dir.path(), |_| {});
    let sock_path = dir.path().join("notify.sock");
    let sock = UnixDatagram::bind(&sock_path).unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut d = Daemon::start(
        &config,
        &[
            ("NOTIFY_SOCKET", sock_path.to_str().unwrap()),
            ("WATCHDOG_USEC", "400000"),
        ],
    );
    let mut buf = [0u8; 4096];
    let mut before_ready = Vec::new();
    let until = Instant::now() + Duration::from_secs(120);
    loop {
        assert!(Instant::now() < until, "no READY=1: {before_ready:?}");
        assert!(d.child.try_wait().unwrap().is_none(), "the daemon exited");
        let Ok(n) = sock.recv(&mut buf) else { continue };
        let msg = String::from_utf8_lossy(&buf[..n]).to_string();
        if msg.lines().any(|l| l == "READY=1") {
            // At READY the port answers and the ensemble is loaded: no wait, no retry.
            let (status, body) = d.get("/health/ready").expect("the port answers at READY");
            assert_eq!(status, 200, "{body}");
            let n = common::TEST_MEMBERS.len();
            assert!(body.contains(&format!("\"models_loaded\":{n}")), "{body}");
            assert!(msg.contains("STATUS=Serving on"), "{msg}");
            // The warm-up ran the members' kernels on rayon's pool, under its own name (not
            // the runtime's, which its threads would otherwise carry).
            let names = thread_names(d.child.id());
            assert!(
                names.iter().any(|n| n.starts_with("holmes-kernel-")),
                "{names:?}"
            );
            break;
        }
        before_ready.push(msg);
    }
    assert!(
        before_ready.iter().any(|m| m.contains("STATUS=Loading")),
        "{before_ready:?}"
    );
    // Pings every WATCHDOG_USEC / 2 = 200 ms while the engine and store are live.
    let t = Instant::now();
    let mut pings = 0;
    while t.elapsed() < Duration::from_secs(2) {
        if let Ok(n) = sock.recv(&mut buf) {
            pings += usize::from(&buf[..n] == b"WATCHDOG=1\n");
        }
    }
    assert!(pings >= 4, "{pings} watchdog pings in 2 s");
    d.signal(libc::SIGTERM);
    let mut stopping = false;
    let until = Instant::now() + Duration::from_secs(20);
    while !stopping && Instant::now() < until {
        if let Ok(n) = sock.recv(&mut buf) {
            stopping = String::from_utf8_lossy(&buf[..n])
                .lines()
                .any(|l| l == "STOPPING=1");
        }
    }
    assert!(stopping, "no STOPPING=1 after SIGTERM");
    let (status, _) = d.wait_exit(30);
    assert!(status.success(), "{status:?}");
}

fn db_open(dir: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open(dir.join("holmes.db")).unwrap()
}

fn count(c: &rusqlite::Connection, sql: &str) -> i64 {
    c.query_row(sql, [], |r| r.get(0)).unwrap()
}

#[test]
fn sigterm_closes_monitors_going_away_and_stores_every_accepted_window() {
    let _one = serial();
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(sigterm_while_windows_are_in_flight());
}

async fn sigterm_while_windows_are_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let config = daemon_config(dir.path(), |c| {
        // One configured bed has phase 0: its windows end at 30 s of signal and every hop after.
        c.ward.beds = vec!["bed-x".into()];
        c.service.shutdown_timeout_secs = 15.0;
    });
    let mut d = Daemon::start(&config, &[]);
    // Blocking waits are fine here: no task of this test runs meanwhile.
    d.wait_ready(120);
    let port = d.port;
    let url = format!("ws://127.0.0.1:{port}/ws/monitor");
    let mut m = common::Monitor::connect(&url, "bed-x", "dev-x").await;
    let t0 = 1_700_000_000_000;
    m.stream(t0, 0..950).await;
    // Acks come at most once a second: a frame after a pause draws one covering all 950.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    m.stream(t0, 950..952).await;
    m.expect(10.0, |v| {
        v["type"] == "ack" && v["samples_seq"].as_u64().is_some_and(|s| s >= 949)
    })
    .await;
    // 95 s of signal: the windows ending every hop from the first whole window on are
    // complete in the server. SIGTERM while they may still be scoring.
    d.signal(libc::SIGTERM);
    let close = m.closed(15.0).await;
    assert_eq!(close.as_ref().map(|c| c.0), Some(1001), "{close:?}");
    let (status, took) = d.wait_exit(30);
    assert!(status.success(), "{status:?}");
    assert!(took < Duration::from_secs(15), "shutdown took {took:?}");
    let wal = dir.path().join("holmes.db-wal");
    assert!(
        std::fs::metadata(&wal).map_or(true, |m| m.len() == 0),
        "the WAL was not checkpointed"
    );
    let c = db_open(dir.path());
    let rows: Vec<(i64, String)> = c
        .prepare(
            "SELECT window_index, status FROM scores WHERE bed = 'bed-x' ORDER BY window_index",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let indexes: Vec<i64> = rows.iter().map(|r| r.0).collect();
    let ward = Config::default().ward;
    let windows = (95 - ward.window_secs) / ward.hop_secs + 1;
    assert_eq!(
        indexes,
        (0..i64::from(windows)).collect::<Vec<_>>(),
        "{rows:?}"
    );
    assert_eq!(
        count(
            &c,
            "SELECT COUNT(*) FROM events WHERE bed = 'server' AND kind = 'server_stop'"
        ),
        1
    );
}

#[test]
fn kill_9_under_load_loses_no_committed_score_and_scoring_resumes() {
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let config = daemon_config(dir.path(), |_| {});
    let mut d = Daemon::start(&config, &[]);
    d.wait_ready(120);
    let port = d.port;
    let mut sim = Command::new(BIN)
        .args(["simulate", "--synthetic", "--beds", "24", "--speed", "8"])
        .args(["--duration", "120", "--url"])
        .arg(format!("ws://127.0.0.1:{port}/ws/monitor"))
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let c = db_open(dir.path());
    let until = Instant::now() + Duration::from_secs(40);
    while count(&c, "SELECT COUNT(*) FROM scores") < 30 {
        assert!(Instant::now() < until, "no scores under load");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Whatever a separate connection sees committed must survive the kill.
    let committed: Vec<i64> = c
        .prepare("SELECT id FROM scores ORDER BY id")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    drop(c);
    d.child.kill().unwrap(); // SIGKILL
    d.child.wait().unwrap();
    let killed_ms = holmes::core::time::now_ms();

    let mut d = Daemon::start(&config, &[]);
    d.wait_ready(60);
    let c = db_open(dir.path());
    let ok: String = c
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ok, "ok");
    let mut q = c
        .prepare("SELECT COUNT(*) FROM scores WHERE id = ?1")
        .unwrap();
    for id in &committed {
        let n: i64 = q.query_row([id], |r| r.get(0)).unwrap();
        assert_eq!(n, 1, "score {id} was committed before the kill and is gone");
    }
    assert_eq!(
        count(
            &c,
            "SELECT COUNT(*) FROM events WHERE bed = 'server' AND kind = 'unclean_shutdown'"
        ),
        1
    );
    assert!(
        count(
            &c,
            "SELECT COUNT(*) FROM events WHERE bed LIKE 'bed-%' AND kind = 'unclean_shutdown'"
        ) >= 1,
        "the beds' gaps are recorded"
    );
    // The simulator, still running, reconnects by itself and scoring resumes.
    let until = Instant::now() + Duration::from_secs(40);
    let sql = format!("SELECT COUNT(*) FROM scores WHERE committed_ms > {killed_ms}");
    while count(&c, &sql) < 10 {
        assert!(sim.try_wait().unwrap().is_none(), "the simulator stopped");
        assert!(Instant::now() < until, "scoring did not resume");
        std::thread::sleep(Duration::from_millis(200));
    }
    // The monitors resent their buffers to the new instance, which welcomed them from
    // sequence 0: no window the earlier run stored is scored again.
    let twice = count(
        &c,
        &format!(
            "SELECT COUNT(*) FROM scores AS n WHERE n.committed_ms > {killed_ms} AND n.window_end_ms <=
               (SELECT max(o.window_end_ms) FROM scores AS o WHERE o.bed = n.bed AND o.committed_ms <= {killed_ms})"
        ),
    );
    assert_eq!(twice, 0, "windows stored before the kill were scored again");
    let _ = sim.kill();
    let _ = sim.wait();
}
