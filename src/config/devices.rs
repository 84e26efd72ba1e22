//! Real monitors in: `[pcd04_in]`, their alarms as IHE PCD-04 `ORU^R40` reports from a ward's
//! gateway or central station over MLLP; `[sdc]`, their ECG and alarms from the monitors
//! themselves over IEEE 11073 SDC. Both off by default.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

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

use super::TlsConfig;

/// One SDC device (a bedside monitor) and the bed it monitors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SdcDevice {
    /// The device's transport address (its XAddr, `http://host:port/path`, or `https://`
    /// where `tls_ca` is set), as its configuration tool shows it: Holmes asks it directly (no
    /// WS-Discovery).
    pub xaddr: String,
    /// The bed it monitors (as a WebSocket monitor's hello names it).
    pub bed: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SdcConfig {
    /// Consume the devices listed (false: none).
    pub enabled: bool,
    /// The address the devices' reports are posted to, `ip:port` (HTTPS where `tls_ca` is
    /// set, plain HTTP otherwise).
    pub notify_listen: String,
    /// The host the devices reach `notify_listen` at, in the address each subscription gives
    /// them (empty: `notify_listen`'s ip).
    pub notify_host: String,
    /// Seconds between renewals of a subscription: under half of what the devices grant
    /// (sdc11073 grants 15 s whatever is asked).
    pub renew_secs: f64,
    /// Seconds a device may take to answer a request.
    pub request_timeout_secs: f64,
    /// Back-off between attempts to reach a device that is gone: from this many ms,
    /// doubling...
    pub retry_min_ms: u64,
    /// ...up to this many.
    pub retry_max_ms: u64,
    /// PEM file of the CA certificates that signed the devices' certificates. Set: every
    /// device is reached over HTTPS and must show a certificate one of them signed, and the
    /// sink takes reports over HTTPS only from such a device (mutual TLS, as SDPi asks).
    /// Unset: plain HTTP both ways.
    pub tls_ca: Option<PathBuf>,
    /// Holmes's own certificate and key, shown to the devices both when it calls them and
    /// as the sink's (unset: `[server.tls]`'s). A CA in the devices' trust list must have
    /// signed it.
    pub tls: Option<TlsConfig>,
    /// The devices, each with its bed.
    pub devices: Vec<SdcDevice>,
}

impl Default for SdcConfig {
    fn default() -> Self {
        SdcConfig {
            enabled: false,
            notify_listen: "127.0.0.1:2577".into(),
            notify_host: String::new(),
            renew_secs: 5.0,
            request_timeout_secs: 5.0,
            retry_min_ms: 500,
            retry_max_ms: 10_000,
            tls_ca: None,
            tls: None,
            devices: Vec::new(),
        }
    }
}

impl SdcConfig {
    /// The address the notification sink binds.
    pub(crate) fn addr(&self) -> Result<SocketAddr, String> {
        self.notify_listen.parse().map_err(|_| {
            format!(
                "sdc.notify_listen {:?} is not ip:port (a numeric address)",
                self.notify_listen
            )
        })
    }

    /// The certificate and key Holmes shows the devices: `[sdc.tls]`'s, else `server`'s;
    /// `None` where TLS is off (`tls_ca` unset) or neither is named.
    pub(crate) fn identity<'a>(&'a self, server: Option<&'a TlsConfig>) -> Option<&'a TlsConfig> {
        self.tls_ca.as_ref()?;
        self.tls.as_ref().or(server)
    }

    pub(crate) fn validate(&self) -> Result<(), String> {
        self.addr()?;
        if !(self.renew_secs > 0.0 && self.renew_secs <= 3_600.0) {
            return Err("sdc.renew_secs must be in (0, 3600]".into());
        }
        if !(self.request_timeout_secs > 0.0 && self.request_timeout_secs <= 600.0) {
            return Err("sdc.request_timeout_secs must be in (0, 600]".into());
        }
        if self.retry_min_ms == 0 || self.retry_max_ms < self.retry_min_ms {
            return Err("sdc: 0 < retry_min_ms <= retry_max_ms".into());
        }
        let mut beds = std::collections::HashSet::new();
        let scheme = if self.tls_ca.is_some() {
            "https://"
        } else {
            "http://"
        };
        for d in &self.devices {
            if !d.xaddr.starts_with(scheme) {
                return Err(format!(
                    "sdc.devices: {:?} is not an {scheme} address ({})",
                    d.xaddr,
                    if self.tls_ca.is_some() {
                        "sdc.tls_ca is set: every device speaks TLS"
                    } else {
                        "a device that speaks TLS needs sdc.tls_ca"
                    }
                ));
            }
            if d.bed.is_empty() || d.bed.chars().count() > 64 || !beds.insert(d.bed.as_str()) {
                return Err(format!(
                    "sdc.devices: bed {:?} must be 1-64 characters and name one device",
                    d.bed
                ));
            }
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

    #[test]
    fn sdc_devices_speak_tls_when_tls_ca_says_so_one_a_bed() {
        let dev = |x: &str, b: &str| SdcDevice {
            xaddr: x.into(),
            bed: b.into(),
        };
        let with = |d: Vec<SdcDevice>| SdcConfig {
            enabled: true,
            devices: d,
            ..SdcConfig::default()
        };
        assert!(
            with(vec![dev("http://10.0.0.7:6464/ab", "bed-1")])
                .validate()
                .is_ok()
        );
        let e = with(vec![dev("https://10.0.0.7:6464/ab", "bed-1")])
            .validate()
            .unwrap_err();
        assert!(e.contains("needs sdc.tls_ca"), "{e}");
        let tls = |d: Vec<SdcDevice>| SdcConfig {
            tls_ca: Some("/etc/holmes/devices-ca.pem".into()),
            ..with(d)
        };
        assert!(
            tls(vec![dev("https://10.0.0.7:6464/ab", "bed-1")])
                .validate()
                .is_ok()
        );
        let e = tls(vec![dev("http://10.0.0.7:6464/ab", "bed-1")])
            .validate()
            .unwrap_err();
        assert!(e.contains("every device speaks TLS"), "{e}");
        let twice = vec![dev("http://a/1", "bed-1"), dev("http://b/2", "bed-1")];
        assert!(with(twice).validate().unwrap_err().contains("one device"));
        let slow = SdcConfig {
            retry_max_ms: 1,
            ..SdcConfig::default()
        };
        assert!(slow.validate().unwrap_err().contains("retry_min_ms"));
    }
}
