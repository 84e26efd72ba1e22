//! Sign-in back-off: failed sign-ins are counted per user name and per client address. Past
//! `dashboard.login_free_failures` failures, each further one shuts that name (and that
//! address) out for `login_backoff_secs`, doubling with every failure up to
//! `login_backoff_max_secs`; while shut out, a sign-in is refused before its password is
//! checked (so a guesser learns nothing and costs no argon2 time). A success clears the name
//! and the address; a key quiet for `login_backoff_max_secs` after its back-off is forgotten.
//!
//! Pure state, driven by [`web`](super::web)'s sign-in handler, which audits each back-off.
//! At most `login_tracked` keys are remembered; beyond it the stalest is forgotten first.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use crate::config::DashboardConfig;

/// What a failure is counted against.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Key {
    /// The user name tried (whether or not such a user exists).
    User(String),
    /// The client's address.
    Addr(IpAddr),
}

impl Key {
    /// A user name as a key; names longer than any valid one are cut (they still count).
    pub(crate) fn user(name: &str) -> Key {
        Key::User(name.chars().take(64).collect())
    }
}

#[derive(Debug)]
struct Entry {
    failures: u32,
    /// Shut out until then.
    until: Option<Instant>,
    last: Instant,
}

/// Failed sign-ins per name and address.
#[derive(Debug)]
pub(crate) struct Throttle {
    free: u32,
    first: Duration,
    max: Duration,
    capacity: usize,
    entries: HashMap<Key, Entry>,
}

impl Throttle {
    pub(crate) fn new(cfg: &DashboardConfig) -> Throttle {
        Throttle {
            free: cfg.login_free_failures,
            first: Duration::from_secs_f64(cfg.login_backoff_secs),
            max: Duration::from_secs_f64(cfg.login_backoff_max_secs),
            capacity: cfg.login_tracked.max(1),
            entries: HashMap::new(),
        }
    }

    /// How much longer a sign-in under these keys must wait, if any of them is shut out.
    pub(crate) fn wait(&self, keys: &[Key], now: Instant) -> Option<Duration> {
        keys.iter()
            .filter_map(|k| self.entries.get(k)?.until)
            .filter(|&u| u > now)
            .map(|u| u - now)
            .max()
    }

    /// A failed sign-in; returns the keys it shut out, each with how long (for the audit log).
    pub(crate) fn failed(&mut self, keys: &[Key], now: Instant) -> Vec<(Key, Duration)> {
        let mut shut = Vec::new();
        for k in keys {
            self.make_room(k, now);
            let e = self.entries.entry(k.clone()).or_insert(Entry {
                failures: 0,
                until: None,
                last: now,
            });
            if e.quiet(now, self.max) {
                // Forgotten: this key starts afresh.
                (e.failures, e.until) = (0, None);
            }
            e.failures = e.failures.saturating_add(1);
            e.last = now;
            if e.failures > self.free {
                let doublings = (e.failures - self.free - 1).min(30);
                let secs = self.first.as_secs_f64() * f64::from(1u32 << doublings);
                let wait = Duration::from_secs_f64(secs.min(self.max.as_secs_f64()));
                e.until = Some(now + wait);
                shut.push((k.clone(), wait));
            }
        }
        shut
    }

    /// A successful sign-in: the name and the address start afresh.
    pub(crate) fn succeeded(&mut self, keys: &[Key]) {
        for k in keys {
            self.entries.remove(k);
        }
    }

    /// Before remembering a new key at capacity: forget the keys that are quiet, then the
    /// stalest.
    fn make_room(&mut self, k: &Key, now: Instant) {
        if self.entries.len() < self.capacity || self.entries.contains_key(k) {
            return;
        }
        self.forget_quiet(now);
        while self.entries.len() >= self.capacity {
            let stalest = self
                .entries
                .iter()
                .min_by_key(|(_, e)| e.last)
                .map(|(k, _)| k.clone());
            match stalest {
                Some(s) => self.entries.remove(&s),
                None => break,
            };
        }
    }

    /// Forgets the keys quiet for `login_backoff_max_secs` after their back-off.
    fn forget_quiet(&mut self, now: Instant) {
        let max = self.max;
        self.entries.retain(|_, e| !e.quiet(now, max));
    }
}

impl Entry {
    /// Nothing happened for `max` since the last failure and the back-off it started.
    fn quiet(&self, now: Instant, max: Duration) -> bool {
        let since = self.until.map_or(self.last, |u| u.max(self.last));
        now.saturating_duration_since(since) >= max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn throttle(free: u32, tracked: usize) -> Throttle {
        let cfg = DashboardConfig {
            login_free_failures: free,
            login_backoff_secs: 1.0,
            login_backoff_max_secs: 8.0,
            login_tracked: tracked,
            ..DashboardConfig::default()
        };
        Throttle::new(&cfg)
    }

    #[test]
    fn back_off_doubles_past_the_free_failures_and_a_success_clears_it() {
        let mut t = throttle(2, 100);
        let now = Instant::now();
        let keys = [Key::user("nina"), Key::Addr([10, 0, 0, 7].into())];
        assert!(t.failed(&keys, now).is_empty());
        assert!(t.failed(&keys, now).is_empty());
        assert_eq!(t.wait(&keys, now), None);
        let s = |secs: u64| Duration::from_secs(secs);
        for want in [1, 2, 4, 8, 8] {
            let shut = t.failed(&keys, now);
            assert_eq!(shut.len(), 2);
            assert!(shut.iter().all(|(_, d)| *d == s(want)), "{shut:?}");
        }
        assert_eq!(t.wait(&keys, now), Some(s(8)));
        // The address alone shuts out another name from it; another address is free.
        let other_name = [Key::user("erik"), Key::Addr([10, 0, 0, 7].into())];
        assert_eq!(t.wait(&other_name, now), Some(s(8)));
        let elsewhere = [Key::user("erik"), Key::Addr([10, 0, 0, 8].into())];
        assert_eq!(t.wait(&elsewhere, now), None);
        assert_eq!(t.wait(&keys, now + s(9)), None);
        t.succeeded(&keys);
        assert_eq!(t.entries.len(), 0);
        // A key quiet for the longest back-off after its own starts afresh.
        for _ in 0..4 {
            t.failed(&keys, now);
        }
        assert_eq!(t.wait(&keys, now), Some(s(2)));
        assert!(t.failed(&keys, now + s(11)).is_empty());
        assert_eq!(t.wait(&keys, now + s(11)), None);
    }

    #[test]
    fn memory_is_bounded_by_login_tracked() {
        let mut t = throttle(5, 10);
        let now = Instant::now();
        for i in 0..1000u32 {
            t.failed(
                &[Key::user(&format!("u{i}"))],
                now + Duration::from_millis(i.into()),
            );
            assert!(t.entries.len() <= 10);
        }
        // The newest names are the ones remembered.
        assert!(t.entries.contains_key(&Key::user("u999")));
        assert!(!t.entries.contains_key(&Key::user("u0")));
    }
}
