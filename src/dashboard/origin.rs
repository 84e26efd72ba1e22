//! The CSRF defence: a state-changing request (any method but GET, HEAD and OPTIONS: sign-in,
//! sign-out, alarm actions, plan controls) that a browser sends must come from this server's
//! own page. `SameSite=Strict` cookies alone do not ensure it: another port on the same host
//! is the same site.
//!
//! Browsers say where a request comes from: `Sec-Fetch-Site` (refused unless `same-origin`,
//! or `none` for what the user did by hand) and `Origin` (refused unless it is the server's
//! own, i.e. the request's `Host`, or one of `dashboard.allowed_origins`). A client that sends
//! neither header is no browser, and no cross-site request can be forged through it. The
//! middleware sits in front of every route ([`http`](crate::http)'s router layers it).

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::web::{DashboardState, WebError};

/// Refuses (403) a state-changing request that a browser sent from another origin.
pub(crate) async fn same_origin(
    State(s): State<DashboardState>,
    req: Request,
    next: Next,
) -> Response {
    if [Method::GET, Method::HEAD, Method::OPTIONS].contains(req.method()) {
        return next.run(req).await;
    }
    match check(&s.cfg.allowed_origins, req.headers()) {
        Ok(()) => next.run(req).await,
        Err(why) => {
            metrics::counter!("holmes_cross_site_refused_total").increment(1);
            tracing::warn!(reason = %why, "Cross-site request refused");
            WebError::CrossSite(why).into_response()
        }
    }
}

/// Why the request is not from this server's page, if it is not.
fn check(allowed: &[String], h: &HeaderMap) -> Result<(), String> {
    if let Some(site) = h.get("sec-fetch-site") {
        let site = site.to_str().unwrap_or("?");
        if site != "same-origin" && site != "none" {
            return Err(format!(
                "cross-site request refused (Sec-Fetch-Site: {site})"
            ));
        }
    }
    let Some(origin) = h.get(header::ORIGIN) else {
        return Ok(());
    };
    let origin = origin.to_str().unwrap_or("?");
    let host = h.get(header::HOST).and_then(|v| v.to_str().ok());
    let own = host.is_some_and(|host| {
        origin.split_once("://").is_some_and(|(scheme, authority)| {
            ["http", "https"].contains(&scheme)
                && without_default_port(scheme, authority)
                    .eq_ignore_ascii_case(without_default_port(scheme, host))
        })
    });
    if own || allowed.iter().any(|a| a.eq_ignore_ascii_case(origin)) {
        Ok(())
    } else {
        Err(format!(
            "cross-site request refused (Origin {origin} is not this server's)"
        ))
    }
}

/// `host:80` over http and `host:443` over https are `host`.
fn without_default_port<'a>(scheme: &str, authority: &'a str) -> &'a str {
    let default = if scheme == "https" { ":443" } else { ":80" };
    authority.strip_suffix(default).unwrap_or(authority)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn only_the_servers_own_origin_may_change_state() {
        let none: &[String] = &[];
        let host = ("host", "127.0.0.1:8080");
        // The page's own requests, and clients that are no browser.
        for ok in [
            headers(&[host, ("origin", "http://127.0.0.1:8080")]),
            headers(&[host, ("origin", "https://127.0.0.1:8080")]),
            headers(&[host, ("sec-fetch-site", "same-origin")]),
            headers(&[host, ("sec-fetch-site", "none")]),
            headers(&[("host", "ward"), ("origin", "https://ward:443")]),
            headers(&[host]),
        ] {
            assert_eq!(check(none, &ok), Ok(()), "{ok:?}");
        }
        // Another site, another port of this host, a sandboxed frame.
        for bad in [
            headers(&[host, ("origin", "http://evil.example")]),
            headers(&[host, ("origin", "http://127.0.0.1:9999")]),
            headers(&[host, ("origin", "null")]),
            headers(&[("origin", "http://127.0.0.1:8080")]),
            headers(&[host, ("sec-fetch-site", "same-site")]),
            headers(&[
                host,
                ("origin", "http://127.0.0.1:8080"),
                ("sec-fetch-site", "cross-site"),
            ]),
        ] {
            let e = check(none, &bad).unwrap_err();
            assert!(e.contains("cross-site request refused"), "{bad:?}: {e}");
        }
        // A proxy's origin, when configured.
        let proxy = vec!["https://ward.example".to_owned()];
        let h = headers(&[host, ("origin", "https://ward.example")]);
        assert!(check(none, &h).is_err());
        assert_eq!(check(&proxy, &h), Ok(()));
    }
}
