//! Wall-clock time as stored and shown: Unix milliseconds, and their UTC calendar fields.

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, in Unix milliseconds (0 on a clock before 1970).
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Unix milliseconds as UTC calendar fields: year, month, day, hour, minute, second,
/// millisecond (H. Hinnant's civil-from-days).
pub(crate) fn utc_fields(ms: i64) -> [i64; 7] {
    let (secs, milli) = (ms.div_euclid(1000), ms.rem_euclid(1000));
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    [y, m, d, rem / 3600, rem / 60 % 60, rem % 60, milli]
}

/// UTC calendar fields (year, month 1-12, day, hour, minute, second, millisecond) as Unix
/// milliseconds: [`utc_fields`]' inverse (H. Hinnant's days-from-civil). The fields are not
/// checked; the caller has.
pub(crate) fn utc_ms([y, m, d, h, mi, s, milli]: [i64; 7]) -> i64 {
    let y = y - i64::from(m <= 2);
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    ((days * 24 + h) * 60 + mi) * 60_000 + s * 1000 + milli
}

/// Unix milliseconds as an HL7 DTM in UTC with milliseconds, `YYYYMMDDHHMMSS.SSS+0000`.
pub fn hl7_dtm(ms: i64) -> String {
    let [y, m, d, h, mi, s, milli] = utc_fields(ms);
    format!("{y:04}{m:02}{d:02}{h:02}{mi:02}{s:02}.{milli:03}+0000")
}
