//! The ward dashboard in a real browser (headless Chromium through chromedriver, installed by
//! `.ci/run` from Debian's packages), with the server fed by the simulator: sign-in, tiles for
//! every bed updating without a reload, a disconnected bed turning stale then lost, a risk
//! alarm acknowledged by a signed-in nurse, a monitor sending V alone marked on its tile and bed
//! view, the lead sets covered on the system view and what would validate its alarm rule, and
//! screenshots of the ward, a bed view and the system view; and, with the composer serving
//! another ensemble, the system view saying why the configured members do not serve.

mod browser;
mod common;

use std::time::Duration;

use browser::{browser, browser_available, text, until};
use fantoccini::Locator;
use holmes::tools::sim::{Faults, SimOptions, Source};

fn sim(url: &str, prefix: &str, beds: usize, secs: f64) -> SimOptions {
    SimOptions {
        url: url.to_owned(),
        beds,
        source: Source::Synthetic,
        duration: Duration::from_secs_f64(secs),
        speed: 10.0,
        start_secs: 0.0,
        token: "t".into(),
        device: None,
        ca: None,
        bed_prefix: prefix.into(),
        faults: Faults::default(),
        records: vec![],
        seed: 7,
        ramp: std::time::Duration::ZERO,
        storm_at: None,
        monitor_alarms: false,
        patient_authority: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ward_page_lives_in_a_real_browser() {
    if !browser_available("the_ward_page_lives_in_a_real_browser") {
        return;
    }
    let data = tempfile::tempdir().unwrap();
    let db = data.path().join("holmes.db");
    common::add_user(
        &db,
        "nina",
        holmes::dashboard::auth::Role::Nurse,
        "night shift 7",
    );
    let db2 = db.clone();
    let app = common::spawn_app(move |c| {
        c.storage.db = db2;
        c.dashboard.public_ward_view = false;
        // Every score crosses this threshold, so each bed raises a risk alarm.
        c.dashboard.risk_alarm_on = 0.0;
        c.dashboard.risk_alarm_off = 0.0;
        c.dashboard.derive_risk_alarm = false;
        c.ward.stale_secs = 3.0;
        c.ward.lost_secs = 8.0;
    })
    .await;
    // The read API is closed without a session.
    let (code, _) = app.get("/api/beds").await;
    assert_eq!(code, 401);
    let raw = app.get_raw("/").await;
    assert!(
        raw.to_ascii_lowercase()
            .contains("content-security-policy: default-src 'none'; script-src 'self'"),
        "{raw}"
    );

    let url = app.ws_url();
    let long = tokio::spawn(holmes::tools::sim::run(sim(&url, "bed-", 2, 120.0)));

    let (_driver, c) = browser().await;
    let page = format!("http://{}/", app.addr);
    c.goto(&page).await.unwrap();
    // Sign in as the nurse.
    c.wait()
        .at_most(Duration::from_secs(10))
        .for_element(Locator::Css("#login-name"))
        .await
        .unwrap()
        .send_keys("nina")
        .await
        .unwrap();
    c.find(Locator::Css("#login-password"))
        .await
        .unwrap()
        .send_keys("night shift 7")
        .await
        .unwrap();
    c.find(Locator::Css("#login-submit"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    until(10, "the signed-in name", || async {
        text(&c, "#who-name").await.filter(|t| t.contains("nina"))
    })
    .await;
    // A marker survives only if the page is never reloaded.
    c.execute("window.__holmes_marker = 42;", vec![])
        .await
        .unwrap();

    // Tiles for every bed.
    until(30, "a tile per bed", || async {
        let tiles = c.find_all(Locator::Css(".tile")).await.ok()?;
        (tiles.len() == 2).then_some(())
    })
    .await;
    // Scores arrive and the tiles update in place.
    let first = until(40, "a score on bed-1", || async {
        text(&c, ".tile[data-bed='bed-1'] .meta")
            .await
            .filter(|t| t.contains("window"))
    })
    .await;
    until(40, "bed-1's next window", || async {
        text(&c, ".tile[data-bed='bed-1'] .meta")
            .await
            .filter(|t| t.contains("window") && *t != first)
    })
    .await;
    let marker = c
        .execute("return window.__holmes_marker;", vec![])
        .await
        .unwrap();
    assert_eq!(marker, serde_json::json!(42), "the page reloaded");

    // A risk alarm shows its onset and its age in seconds, which ticks.
    let age =
        |t: &str| -> Option<i64> { t.rsplit(" · ").next()?.strip_suffix(" s")?.parse().ok() };
    let first = until(10, "the risk alarm's onset and age", || async {
        text(&c, ".alarm.risk .alarm-onset")
            .await
            .filter(|t| t.starts_with("onset ") && age(t).is_some())
    })
    .await;
    until(10, "the alarm's age ticking", || async {
        let now = text(&c, ".alarm.risk .alarm-onset").await?;
        (age(&now)? > age(&first)?).then_some(())
    })
    .await;
    // A risk alarm, acknowledged by the signed-in nurse.
    let ack = until(30, "a risk alarm with an acknowledge button", || async {
        c.find(Locator::Css(".alarm.risk button.ack")).await.ok()
    })
    .await;
    // The bar may be redrawn between finding the alarm and reading it: read a fresh one.
    let alarm_id: i64 = until(10, "the risk alarm's id", || async {
        let a = c.find(Locator::Css(".alarm.risk")).await.ok()?;
        a.attr("data-alarm").await.ok()??.parse().ok()
    })
    .await;
    // The alarm bar is redrawn with every snapshot: click a fresh button if that one went.
    if ack.click().await.is_err() {
        until(10, "a click on acknowledge", || async {
            let b = c.find(Locator::Css(".alarm.risk button.ack")).await.ok()?;
            b.click().await.ok()
        })
        .await;
    }
    until(10, "the acknowledgement", || async {
        text(&c, &format!(".alarm[data-alarm='{alarm_id}'] .acked-by"))
            .await
            .filter(|t| t.contains("nina"))
    })
    .await;
    let conn = rusqlite::Connection::open(&db).unwrap();
    let (by, at): (String, i64) = conn
        .query_row(
            "SELECT acked_by, acked_ms FROM alarms WHERE id = ?1",
            [alarm_id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(by, "nina");
    assert!(at > 0);
    let audited: i64 = conn
        .query_row(
            "SELECT count(*) FROM audit WHERE action = 'alarm_acknowledged' AND user = 'nina'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(audited, 1);

    // A monitor that connects, streams a few seconds and stops: its tile appears, then turns
    // stale, then lost.
    let short = tokio::spawn(holmes::tools::sim::run(sim(&url, "gone-", 1, 3.0)));
    until(20, "gone-1's tile", || async {
        let tiles = c.find_all(Locator::Css(".tile")).await.ok()?;
        (tiles.len() == 3).then_some(())
    })
    .await;
    short.await.unwrap().unwrap();
    let state = ".tile[data-bed='gone-1'] .state";
    until(20, "gone-1 stale", || async {
        text(&c, state)
            .await
            .filter(|t| t.eq_ignore_ascii_case("stale"))
    })
    .await;
    until(20, "gone-1 lost", || async {
        text(&c, state)
            .await
            .filter(|t| t.eq_ignore_ascii_case("lost"))
    })
    .await;

    // A monitor sending V alone: its tile says it is scored from the secondary lead alone,
    // and that its alarm raises more false alarms, as its bed view explains; a tile of a
    // monitor sending both leads says nothing of its leads.
    let mut v_hello = common::hello("v-only-1", "mon-v");
    v_hello["ecg"] = serde_json::json!([{"lead": "V", "hz": 250}]);
    let mut v = common::Monitor::connect_with(&url, &v_hello).await;
    let t0 = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
        - 40_000;
    v.stream_leads(t0, 0..400, &["V"]).await;
    // Tiles are redrawn with every snapshot: read each from a fresh element.
    until(30, "v-only-1's lead flag", || async {
        let flag = c
            .find(Locator::Css(
                ".tile[data-bed='v-only-1'] .flags .one-lead.warn",
            ))
            .await
            .ok()?;
        let (text, title) = (flag.text().await.ok()?, flag.attr("title").await.ok()??);
        (text.starts_with("secondary lead only") && title.contains("chosen with both leads"))
            .then_some(())
    })
    .await;
    until(10, "bed-1's tile without a lead flag", || async {
        c.find(Locator::Css(".tile[data-bed='bed-1']")).await.ok()?;
        let flags = c
            .find_all(Locator::Css(".tile[data-bed='bed-1'] .one-lead"))
            .await
            .ok()?;
        flags.is_empty().then_some(())
    })
    .await;
    c.goto(&format!("{page}#/bed/v-only-1")).await.unwrap();
    until(15, "v-only-1's bed view naming its one lead", || async {
        text(&c, "#bed-state")
            .await
            .filter(|t| t.contains("scored from the secondary lead alone"))
    })
    .await;
    c.goto(&page).await.unwrap();
    until(15, "the ward again", || async {
        let tiles = c.find_all(Locator::Css(".tile")).await.ok()?;
        (tiles.len() == 4).then_some(())
    })
    .await;

    // Screenshots of the ward and of a bed view, kept as test artifacts.
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("ward.png"), c.screenshot().await.unwrap()).unwrap();
    c.goto(&format!("{page}#/bed/bed-1")).await.unwrap();
    c.wait()
        .at_most(Duration::from_secs(15))
        .for_element(Locator::Css("#strips canvas.strip"))
        .await
        .unwrap();
    until(15, "bed-1's score history", || async {
        let rows = c
            .find_all(Locator::Css("#bed-scores tbody tr"))
            .await
            .ok()?;
        (!rows.is_empty()).then_some(())
    })
    .await;
    // The strip marks where the bed's risk alarm fired (on the strip, or before it when the
    // onset is older than the strip), and the alarm history names its onset and rule.
    until(15, "the alarm's mark on the strip", || async {
        let strip = c.find(Locator::Css("#strips canvas.strip")).await.ok()?;
        let mark = strip.attr("data-alarm-mark").await.ok()??;
        (mark == "inside" || mark == "before").then_some(())
    })
    .await;
    until(
        15,
        "the risk alarm's onset and rule in the history",
        || async {
            let rows = c
                .find_all(Locator::Css("#bed-alarms tbody tr"))
                .await
                .ok()?;
            for r in rows {
                let t = r.text().await.ok()?;
                if t.contains("risk") && t.contains("in 1 of 1, not validated") {
                    let cells = r.find_all(Locator::Css("td")).await.ok()?;
                    let onset = cells.get(2)?.text().await.ok()?;
                    return (!onset.is_empty()).then_some(());
                }
            }
            None
        },
    )
    .await;
    std::fs::write(out.join("bed.png"), c.screenshot().await.unwrap()).unwrap();
    // The system view says which lead sets the serving ensemble covers: all three here.
    c.goto(&format!("{page}#/system")).await.unwrap();
    until(15, "the lead sets covered", || async {
        text(&c, "#lead-sets")
            .await
            .filter(|t| t == "II only ✓, V only ✓, both ✓")
    })
    .await;
    // The rule serving is not validated here, and the view says what would validate one.
    until(15, "what would validate a rule", || async {
        text(&c, ".rule-note").await.filter(|t| {
            t.starts_with("Not validated for this ensemble")
                && t.contains("holmes zoo rules says why")
                && t.contains("holmes evaluate --revalidate")
        })
    })
    .await;
    // And that the configured members are what serves (no composer here).
    let configured = format!("{}: serving", common::TEST_MEMBERS.join(", "));
    until(15, "the configured members", || async {
        text(&c, "#configured-members")
            .await
            .filter(|t| *t == configured)
    })
    .await;
    std::fs::write(out.join("system.png"), c.screenshot().await.unwrap()).unwrap();
    println!("screenshots in {}", out.display());
    c.close().await.unwrap();
    long.abort();
    app.stop().await;
}

/// Where the composer serves another ensemble than the configured members, the system view
/// says why: here the configured members are a vitals model, which scores no ECG lead set the
/// zoo's models can.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_system_view_says_why_the_configured_members_do_not_serve() {
    if !browser_available("the_system_view_says_why_the_configured_members_do_not_serve") {
        return;
    }
    let zoo = tempfile::tempdir().unwrap();
    for m in [
        "ecg-primary-5s-w8-d2",
        "ecg-secondary-5s-w8-d2",
        "vitals-hr-logreg",
    ] {
        common::copy_model(m, zoo.path());
    }
    let zdir = zoo.path().to_owned();
    let app = common::spawn_app(move |c| {
        c.ensemble.models_dir = zdir;
        c.ensemble.members = vec!["vitals-hr-logreg".into()];
        c.composer.enabled = true;
        c.composer.method = "exact".into();
        c.dashboard.public_ward_view = true;
    })
    .await;
    let (_driver, c) = browser().await;
    c.goto(&format!("http://{}/#/system", app.addr))
        .await
        .unwrap();
    until(60, "why the configured members do not serve", || async {
        text(&c, "#configured-members").await.filter(|t| {
            t.starts_with("vitals-hr-logreg: the composer serves the ensemble above instead")
                && t.contains("they leave monitors sending lead II only or lead V only or both leads unscored")
        })
    })
    .await;
    c.close().await.unwrap();
    app.stop().await;
}
