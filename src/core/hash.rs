//! SHA-256 as lower-case hex: model weights' checksums, and the hashes of device tokens and
//! session cookies (never stored in clear).

use sha2::{Digest, Sha256};

/// SHA-256 of `bytes`, lower-case hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
