//! Parsing of `.hea` header files (single-segment records).

use std::path::{Path, PathBuf};

use super::WfdbError;

/// One signal line of a header.
#[derive(Debug, Clone, PartialEq)]
pub struct SignalSpec {
    /// Signal file name, relative to the header's folder.
    pub(crate) file: String,
    /// Storage format (212 or 16 are readable).
    pub(crate) format: u32,
    /// Bytes to skip at the start of the signal file before the first sample.
    pub(crate) byte_offset: u64,
    /// ADC units per physical unit.
    pub gain: f64,
    /// ADC value that corresponds to 0 physical units.
    pub(crate) baseline: i32,
    /// Physical unit, `mV` when the header names none.
    pub(crate) units: String,
    /// ADC resolution in bits (0 when not given).
    pub(crate) adc_resolution: u32,
    /// ADC value at the midpoint of the ADC range.
    pub(crate) adc_zero: i32,
    /// First sample value, as the header records it (for a sanity check).
    pub initial_value: Option<i32>,
    /// 16-bit checksum of all samples, as the header records it.
    pub checksum: Option<i32>,
    /// Free-text description, e.g. a lead name such as `MLII`.
    pub description: String,
}

/// A parsed header.
#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    /// Path of the `.hea` file this was read from.
    pub(crate) path: PathBuf,
    pub(crate) record: String,
    /// Samples per second per signal.
    pub fs: f64,
    /// Samples per signal (0 when the header does not say).
    pub(crate) samples: usize,
    pub signals: Vec<SignalSpec>,
    /// `#` comment lines, without the `#`.
    pub(crate) comments: Vec<String>,
}

/// WFDB's default gain when a header gives none or 0.
const DEFAULT_GAIN: f64 = 200.0;
/// WFDB's default sampling frequency when a header gives none.
const DEFAULT_FS: f64 = 250.0;

impl Header {
    /// Reads and parses `path`.
    pub(crate) fn read(path: &Path) -> Result<Header, WfdbError> {
        let text = std::fs::read_to_string(path).map_err(|source| WfdbError::Io {
            path: path.to_owned(),
            source,
        })?;
        Header::parse(path, &text)
    }

    /// Parses header text; `path` only names the file in errors.
    pub(crate) fn parse(path: &Path, text: &str) -> Result<Header, WfdbError> {
        let err = |line: usize, reason: String| WfdbError::Header {
            path: path.to_owned(),
            line,
            reason,
        };
        let mut comments = Vec::new();
        let mut lines = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let l = raw.trim();
            if let Some(c) = l.strip_prefix('#') {
                comments.push(c.trim().to_owned());
            } else if !l.is_empty() {
                lines.push((i + 1, l));
            }
        }
        let &(first_no, first) = lines
            .first()
            .ok_or_else(|| err(1, "no record line".into()))?;
        let mut f = first.split_whitespace();
        let name = f.next().unwrap_or_default();
        if name.contains('/') {
            return Err(err(
                first_no,
                "multi-segment records are not supported".into(),
            ));
        }
        let nsig: usize = f
            .next()
            .ok_or_else(|| err(first_no, "missing number of signals".into()))?
            .parse()
            .map_err(|e| err(first_no, format!("number of signals: {e}")))?;
        let fs = match f.next() {
            Some(tok) => {
                let v = tok.split(['/', '(']).next().unwrap_or(tok);
                v.parse::<f64>()
                    .map_err(|e| err(first_no, format!("sampling frequency {tok:?}: {e}")))?
            }
            None => DEFAULT_FS,
        };
        if !(fs.is_finite() && fs > 0.0) {
            return Err(err(
                first_no,
                format!("sampling frequency {fs} is not positive"),
            ));
        }
        let samples = match f.next() {
            Some(tok) => tok
                .parse()
                .map_err(|e| err(first_no, format!("number of samples {tok:?}: {e}")))?,
            None => 0,
        };
        if lines.len() < 1 + nsig {
            return Err(err(
                first_no,
                format!(
                    "header announces {nsig} signals but has {} signal lines",
                    lines.len() - 1
                ),
            ));
        }
        let signals = lines[1..=nsig]
            .iter()
            .map(|&(no, l)| parse_signal_line(l).map_err(|r| err(no, r)))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Header {
            path: path.to_owned(),
            record: name.to_owned(),
            fs,
            samples,
            signals,
            comments,
        })
    }
}

fn parse_signal_line(line: &str) -> Result<SignalSpec, String> {
    let mut f = line.split_whitespace();
    let file = f.next().ok_or("empty signal line")?.to_owned();
    let fmt_tok = f.next().ok_or("missing signal format")?;
    // format[xsamples][:skew][+offset]
    let (fmt_part, byte_offset) = match fmt_tok.split_once('+') {
        Some((a, b)) => (
            a,
            b.parse::<u64>()
                .map_err(|e| format!("byte offset {b:?}: {e}"))?,
        ),
        None => (fmt_tok, 0),
    };
    let fmt_digits: String = fmt_part.chars().take_while(char::is_ascii_digit).collect();
    if fmt_part[fmt_digits.len()..].starts_with('x') {
        return Err("multi-frequency signals (format NxM) are not supported".into());
    }
    let format: u32 = fmt_digits
        .parse()
        .map_err(|e| format!("signal format {fmt_tok:?}: {e}"))?;

    let gain_tok = f.next();
    let (mut gain, mut baseline, mut units) = (DEFAULT_GAIN, None, "mV".to_owned());
    if let Some(tok) = gain_tok {
        let (g, u) = match tok.split_once('/') {
            Some((g, u)) => (g, Some(u)),
            None => (tok, None),
        };
        let (g, b) = match g.split_once('(') {
            Some((g, b)) => (g, Some(b.trim_end_matches(')'))),
            None => (g, None),
        };
        gain = g.parse().map_err(|e| format!("gain {tok:?}: {e}"))?;
        if gain == 0.0 {
            gain = DEFAULT_GAIN;
        }
        if let Some(b) = b {
            baseline = Some(b.parse().map_err(|e| format!("baseline {tok:?}: {e}"))?);
        }
        if let Some(u) = u {
            units = u.to_owned();
        }
    }
    let int = |name: &str, tok: Option<&str>| -> Result<Option<i32>, String> {
        tok.map(|t| t.parse::<i32>().map_err(|e| format!("{name} {t:?}: {e}")))
            .transpose()
    };
    let adc_resolution = int("ADC resolution", f.next())?.unwrap_or(0) as u32;
    let adc_zero = int("ADC zero", f.next())?.unwrap_or(0);
    let initial_value = int("initial value", f.next())?;
    let checksum = int("checksum", f.next())?;
    let _block_size = int("block size", f.next())?;
    let description = f.collect::<Vec<_>>().join(" ");
    Ok(SignalSpec {
        file,
        format,
        byte_offset,
        gain,
        baseline: baseline.unwrap_or(adc_zero),
        units,
        adc_resolution,
        adc_zero,
        initial_value,
        checksum,
        description,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_mitdb_style_header() {
        let text = "100 2 360 650000\r\n100.dat 212 200 11 1024 995 -22131 0 MLII\r\n\
                    100.dat 212 200 11 1024 1011 20052 0 V5\r\n# 69 M 1085 1629 x1\r\n";
        let h = Header::parse(Path::new("100.hea"), text).unwrap();
        assert_eq!(h.record, "100");
        assert_eq!(h.fs, 360.0);
        assert_eq!(h.samples, 650_000);
        assert_eq!(h.signals.len(), 2);
        let s = &h.signals[0];
        assert_eq!(
            (s.format, s.gain, s.baseline, s.adc_zero),
            (212, 200.0, 1024, 1024)
        );
        assert_eq!((s.initial_value, s.checksum), (Some(995), Some(-22131)));
        assert_eq!(s.description, "MLII");
        assert_eq!(h.comments, vec!["69 M 1085 1629 x1".to_owned()]);
    }

    #[test]
    fn parses_offset_baseline_and_units() {
        let text = "rec 1 500/10 1000\nrec.mat 16+24 1000(-5)/uV 16 0 12 0 0 II\n";
        let h = Header::parse(Path::new("rec.hea"), text).unwrap();
        let s = &h.signals[0];
        assert_eq!((s.format, s.byte_offset), (16, 24));
        assert_eq!((s.gain, s.baseline, s.units.as_str()), (1000.0, -5, "uV"));
        assert_eq!(h.fs, 500.0);
    }

    #[test]
    fn names_file_and_line_on_error() {
        let e = Header::parse(Path::new("x.hea"), "x 2 250 10\nx.dat 212 200\n").unwrap_err();
        assert!(e.to_string().contains("x.hea: line 1"), "{e}");
        let e = Header::parse(Path::new("x.hea"), "x 1 250 10\nx.dat abc\n").unwrap_err();
        assert!(e.to_string().contains("x.hea: line 2"), "{e}");
    }
}
