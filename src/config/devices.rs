//! `[pcd04_in]`: real monitors' alarms in, as IHE PCD-04 `ORU^R40` reports from a ward's
//! gateway or central station over MLLP. Off by default.

use std::net::{IpAddr, SocketAddr};

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Pcd04InConfig {
    /// Listen for a gateway's alarm reports (false: no listener).
    pub enabled: bool,
    /// The address the MLLP listener binds, `ip:port` (plain TCP: bind it to the gateways'
    /// network, and name them in `allowed_peers`).
    pub listen: String,
    /// The gateways' addresses allowed to connect; any other is closed at once, counted and
    /// logged. Empty: any, which only a loopback `listen` may have.
    pub allowed_peers: Vec<IpAddr>,
    /// Gateway connections held at once; one more is closed at once.
    pub max_connections: usize,
    /// Seconds a connection may stay silent before it is closed (a gateway keeps its link
    /// alive with its watchdog reports).
    pub idle_timeout_secs: f64,
    /// Hours a report stays in the inbox after it was taken: a restart within them hands on
    /// again every alarm (or end) taken but not yet stored.
    pub inbox_hours: f64,
}

impl Default for Pcd04InConfig {
    fn default() -> Self {
        Pcd04InConfig {
            enabled: false,
            listen: "127.0.0.1:2576".into(),
            allowed_peers: Vec::new(),
            max_connections: 16,
            idle_timeout_secs: 300.0,
            inbox_hours: 1.0,
        }
    }
}

impl Pcd04InConfig {
    /// The address to bind.
    pub(crate) fn addr(&self) -> Result<SocketAddr, String> {
        self.listen.parse().map_err(|_| {
            format!(
                "pcd04_in.listen {:?} is not ip:port (a numeric address)",
                self.listen
            )
        })
    }

    pub(crate) fn validate(&self) -> Result<(), String> {
        let addr = self.addr()?;
        if self.enabled && !addr.ip().is_loopback() && self.allowed_peers.is_empty() {
            return Err(format!(
                "pcd04_in.listen {} takes reports from the network: name the gateways in \
                 pcd04_in.allowed_peers (MLLP has no authentication of its own)",
                self.listen
            ));
        }
        if self.max_connections == 0 {
            return Err("pcd04_in.max_connections must be positive".into());
        }
        if !(self.idle_timeout_secs > 0.0 && self.idle_timeout_secs <= 86_400.0) {
            return Err("pcd04_in.idle_timeout_secs must be in (0, 86400]".into());
        }
        if !(self.inbox_hours > 0.0 && self.inbox_hours <= 24.0 * 365.0) {
            return Err("pcd04_in.inbox_hours must be in (0, 8760]".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listener_off_loopback_must_name_its_gateways() {
        let on = |listen: &str, peers: &[&str]| Pcd04InConfig {
            enabled: true,
            listen: listen.into(),
            allowed_peers: peers.iter().map(|p| p.parse().unwrap()).collect(),
            ..Pcd04InConfig::default()
        };
        assert!(on("127.0.0.1:2576", &[]).validate().is_ok());
        let e = on("0.0.0.0:2576", &[]).validate().unwrap_err();
        assert!(e.contains("allowed_peers"), "{e}");
        assert!(on("0.0.0.0:2576", &["10.20.0.5"]).validate().is_ok());
        let e = on("gateway:2576", &[]).validate().unwrap_err();
        assert!(e.contains("ip:port"), "{e}");
        let zero = Pcd04InConfig {
            max_connections: 0,
            ..Pcd04InConfig::default()
        };
        assert!(zero.validate().unwrap_err().contains("max_connections"));
    }
}
