//! A risk alarm rule that a VT run short of the beat counter's call can hold on is served as
//! configured and warned of in the daemon's log: the fallback at 0 / 0 beside the counter is,
//! the default fallback (0.7 / 0.5) is not. The log is read as an operator reads it, through
//! the daemon's `tracing` output (captured here by this test binary's only subscriber).

mod common;

use std::io::Write;
use std::sync::{Arc, Mutex};

use common::spawn_app;

/// What the board warns with (the start of its message).
const WARNING: &str = "The risk alarm rule clears at or below what a window with a VT run short";

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }

    /// Waits up to 30 s for `count` lines holding `needle`; the log's text then.
    async fn wait_for(&self, needle: &str, count: usize) -> String {
        let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let text = self.text();
            if text.lines().filter(|l| l.contains(needle)).count() >= count {
                return text;
            }
            assert!(
                std::time::Instant::now() < until,
                "no {needle:?} x{count}: {text}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fallback_clearing_under_a_short_runs_score_beside_the_counter_is_warned_of() {
    let log = Captured::default();
    let sink = log.clone();
    tracing_subscriber::fmt()
        .with_writer(move || sink.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .init();

    // At a 3-s hop the zoo's rule book has no rule: the fallback serves, beside the counter.
    let plain = spawn_app(|c| {
        c.ward.hop_secs = 3;
        assert!(c.ensemble.count_beats, "the counter serves by default");
    })
    .await;
    // The rule is chosen (and logged) at start-up.
    let text = log.wait_for("Risk alarm rule", 1).await;
    let h = plain.health().await;
    assert_eq!(h["alarm_rule"]["off"], 0.5, "{h}");
    assert_eq!(h["alarm_rule"]["validated"], false, "{h}");
    plain.stop().await;
    assert!(!text.contains(WARNING), "0.5 clears above 0.198: {text}");

    let zeros = spawn_app(|c| {
        c.ward.hop_secs = 3;
        c.dashboard.risk_alarm_on = 0.0;
        c.dashboard.risk_alarm_off = 0.0;
    })
    .await;
    let text = log.wait_for(WARNING, 1).await;
    let h = zeros.health().await;
    assert_eq!(h["alarm_rule"]["off"], 0.0, "served as configured: {h}");
    zeros.stop().await;
    let warned = text
        .lines()
        .find(|l| l.contains(WARNING))
        .unwrap_or_else(|| panic!("no warning: {text}"));
    assert!(warned.contains("WARN"), "{warned}");
    assert!(
        warned.contains("NOT validated: the config's fallback"),
        "{warned}"
    );
}
