//! Wall-clock time as stored and shown: Unix milliseconds.

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, in Unix milliseconds (0 on a clock before 1970).
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
