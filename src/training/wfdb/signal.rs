//! Decoding of signal files (formats 212 and 16) into digital and physical samples.

use std::path::Path;

use super::{Header, WfdbError};

/// A record: its header and every signal's samples, decoded.
#[derive(Debug, Clone)]
pub struct Record {
    pub header: Header,
    /// `digital[signal][sample]`, ADC units as stored.
    pub digital: Vec<Vec<i32>>,
}

impl Record {
    /// Opens record `name` in `dir` (reads `name.hea` and the signal files it names).
    pub fn open(dir: &Path, name: &str) -> Result<Record, WfdbError> {
        let header = Header::read(&dir.join(format!("{name}.hea")))?;
        let mut digital = vec![Vec::new(); header.signals.len()];
        // Signals that share a file are interleaved in it, in header order.
        let mut done = vec![false; header.signals.len()];
        for i in 0..header.signals.len() {
            if done[i] {
                continue;
            }
            let spec = &header.signals[i];
            let members: Vec<usize> = (i..header.signals.len())
                .filter(|&j| header.signals[j].file == spec.file)
                .collect();
            let path = dir.join(&spec.file);
            for &j in &members {
                let other = &header.signals[j];
                if other.format != spec.format || other.byte_offset != spec.byte_offset {
                    return Err(WfdbError::Signal {
                        path,
                        reason: "signals sharing a file must share format and byte offset".into(),
                    });
                }
            }
            let bytes = std::fs::read(&path).map_err(|source| WfdbError::Io {
                path: path.clone(),
                source,
            })?;
            let start = usize::try_from(spec.byte_offset).unwrap_or(usize::MAX);
            let body = bytes.get(start..).ok_or_else(|| WfdbError::Signal {
                path: path.clone(),
                reason: format!(
                    "byte offset {start} is past the end ({} bytes)",
                    bytes.len()
                ),
            })?;
            let stream = decode(&path, spec.format, body)?;
            let per = members.len();
            let frames = stream.len() / per;
            let frames = if header.samples > 0 {
                if frames < header.samples {
                    return Err(WfdbError::Signal {
                        path,
                        reason: format!(
                            "holds {frames} samples per signal, header says {}",
                            header.samples
                        ),
                    });
                }
                header.samples
            } else {
                frames
            };
            for (k, &j) in members.iter().enumerate() {
                digital[j] = (0..frames).map(|t| stream[t * per + k]).collect();
                done[j] = true;
            }
        }
        Ok(Record { header, digital })
    }

    /// Samples per signal.
    pub fn len(&self) -> usize {
        self.digital.first().map_or(0, Vec::len)
    }

    /// True when the record holds no samples.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Signal `i` in physical units: `(digital - baseline) / gain`.
    pub fn physical(&self, i: usize) -> Vec<f32> {
        let s = &self.header.signals[i];
        let (b, g) = (s.baseline as f64, s.gain);
        self.digital[i]
            .iter()
            .map(|&d| ((d as f64 - b) / g) as f32)
            .collect()
    }

    /// WFDB's 16-bit checksum of signal `i` (sum of samples, truncated to a signed 16 bits).
    pub fn checksum(&self, i: usize) -> i32 {
        let sum: i64 = self.digital[i].iter().map(|&v| v as i64).sum();
        (sum as u16) as i16 as i32
    }
}

fn decode(path: &Path, format: u32, body: &[u8]) -> Result<Vec<i32>, WfdbError> {
    match format {
        212 => Ok(decode_212(body)),
        16 => Ok(body
            .chunks_exact(2)
            .map(|c| i16::from_le_bytes([c[0], c[1]]) as i32)
            .collect()),
        other => Err(WfdbError::UnsupportedFormat {
            path: path.to_owned(),
            format: other,
        }),
    }
}

/// Format 212: pairs of 12-bit two's-complement samples packed into 3 bytes.
fn decode_212(body: &[u8]) -> Vec<i32> {
    let sext = |v: i32| if v & 0x800 != 0 { v - 0x1000 } else { v };
    let mut out = Vec::with_capacity(body.len() / 3 * 2 + 1);
    let mut chunks = body.chunks_exact(3);
    for c in &mut chunks {
        let (b0, b1, b2) = (c[0] as i32, c[1] as i32, c[2] as i32);
        out.push(sext(b0 | ((b1 & 0x0f) << 8)));
        out.push(sext(b2 | ((b1 & 0xf0) << 4)));
    }
    // A trailing pair of bytes holds one last sample.
    if let [b0, b1] = chunks.remainder() {
        out.push(sext(*b0 as i32 | ((*b1 as i32 & 0x0f) << 8)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_212_by_hand() {
        // samples 0x123 = 291 and 0xFFE = -2, packed: b0 = 0x23, b1 = (0xF << 4) | 0x1, b2 = 0xFE
        assert_eq!(decode_212(&[0x23, 0xF1, 0xFE]), vec![291, -2]);
        assert_eq!(decode_212(&[0xFF, 0x07, 0x00]), vec![2047, 0]);
        assert_eq!(decode_212(&[0x00, 0x08, 0x00]), vec![-2048, 0]);
    }

    #[test]
    fn reads_format_16_with_byte_offset() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("m.hea"),
            "m 2 250 3\nm.mat 16+4 100(10)/mV 16 0 0 0 0 I\nm.mat 16+4 50 16 0 0 0 0 II\n",
        )
        .unwrap();
        let mut bytes = vec![0xAA; 4]; // junk before the offset
        for v in [110i16, -40, 210, 0, -90, 5] {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
        std::fs::write(dir.path().join("m.mat"), bytes).unwrap();
        let r = Record::open(dir.path(), "m").unwrap();
        assert_eq!(r.digital, vec![vec![110, 210, -90], vec![-40, 0, 5]]);
        assert_eq!(r.physical(0), vec![1.0, 2.0, -1.0]);
        assert_eq!(r.physical(1), vec![-0.8, 0.0, 0.1]);
    }

    #[test]
    fn short_signal_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("s.hea"), "s 1 250 10\ns.dat 16 200\n").unwrap();
        std::fs::write(dir.path().join("s.dat"), [0u8; 6]).unwrap();
        let e = Record::open(dir.path(), "s").unwrap_err().to_string();
        assert!(e.contains("s.dat") && e.contains("header says 10"), "{e}");
    }
}
