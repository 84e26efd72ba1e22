//! The headless browser the page's tests drive (Chromium through chromedriver, Debian's
//! `chromium` and `chromium-driver`, which `.ci/run` installs) and what they share: starting a
//! session, polling the page, reading an element's text.
#![allow(dead_code)]

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};

pub struct Driver(Child);

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub async fn browser() -> (Driver, Client) {
    let port = free_port();
    let child = Command::new("chromedriver")
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromedriver (Debian package chromium-driver; .ci/run installs it)");
    let driver = Driver(child);
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        serde_json::json!({"args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                                    "--disable-dev-shm-usage", "--window-size=1920,1080"]}),
    );
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        match ClientBuilder::rustls()
            .unwrap()
            .capabilities(caps.clone())
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
        {
            Ok(c) => return (driver, c),
            Err(e) if Instant::now() < until => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("cannot start a browser session: {e}"),
        }
    }
}

/// Polls `f` until it returns Some, or fails with `what`.
pub async fn until<T, F: std::future::Future<Output = Option<T>>>(
    secs: u64,
    what: &str,
    mut f: impl FnMut() -> F,
) -> T {
    let end = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(Instant::now() < end, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

pub async fn text(c: &Client, css: &str) -> Option<String> {
    match c.find(Locator::Css(css)).await {
        Ok(e) => e.text().await.ok(),
        Err(_) => None,
    }
}

/// Whether a browser can be driven here: chromedriver on the PATH. `.ci/run` installs it and
/// sets `HOLMES_REQUIRE_BROWSER=1`, so in CI a missing browser fails the test.
pub fn browser_available(test: &str) -> bool {
    let found = Command::new("chromedriver")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        assert!(
            std::env::var_os("HOLMES_REQUIRE_BROWSER").is_none(),
            "HOLMES_REQUIRE_BROWSER is set but chromedriver is not on the PATH"
        );
        println!(
            "SKIPPED {test}: chromedriver not found (apt-get install chromium chromium-driver)"
        );
    }
    found
}
