//! Reading of MIT-format annotation files (`.atr`).
//!
//! The file is a stream of 16-bit little-endian words: the top 6 bits are a code and the low
//! 10 bits a sample interval. Codes 59 to 63 are pseudo-annotations (SKIP, NUM, SUB, CHN, AUX)
//! that modify time or the annotation just read.

use std::path::Path;

use super::WfdbError;

/// One annotation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Annotation {
    /// Sample index (at the record's sampling frequency).
    pub(crate) sample: i64,
    /// Annotation code (0..=49, 0 being NOTQRS), see [`symbol_of`].
    pub(crate) code: u8,
    /// Subtype; for `~` noise annotations a bit mask of noisy (bits 0-3) and unreadable
    /// (bits 4-7) signals, with -1 meaning every signal unreadable.
    pub subtype: i8,
    pub(crate) chan: u8,
    pub(crate) num: i8,
    /// Auxiliary string, e.g. a rhythm such as `(VT` on a `+` annotation.
    pub aux: Option<String>,
}

impl Annotation {
    /// The annotation's mnemonic, e.g. `N`, `+`, `[`.
    pub fn symbol(&self) -> &'static str {
        symbol_of(self.code)
    }
}

const SKIP: u16 = 59;
const NUM: u16 = 60;
const SUB: u16 = 61;
const CHN: u16 = 62;
const AUX: u16 = 63;

/// WFDB's standard mnemonics by annotation code.
pub fn symbol_of(code: u8) -> &'static str {
    const TABLE: [&str; 42] = [
        " ", "N", "L", "R", "a", "V", "F", "J", "A", "S", "E", "j", "/", "Q", "~", "[15]", "|",
        "[17]", "s", "T", "*", "D", "\"", "=", "p", "B", "^", "t", "+", "u", "?", "!", "[", "]",
        "e", "n", "@", "x", "f", "(", ")", "r",
    ];
    TABLE.get(code as usize).copied().unwrap_or("?")
}

/// Reads every annotation of `path`, in file order.
pub fn read_annotations(path: &Path) -> Result<Vec<Annotation>, WfdbError> {
    let bytes = std::fs::read(path).map_err(|source| WfdbError::Io {
        path: path.to_owned(),
        source,
    })?;
    parse(path, &bytes)
}

fn parse(path: &Path, bytes: &[u8]) -> Result<Vec<Annotation>, WfdbError> {
    let err = |offset: usize, reason: &str| WfdbError::Annotation {
        path: path.to_owned(),
        offset,
        reason: reason.to_owned(),
    };
    let word = |at: usize| -> Option<u16> {
        bytes
            .get(at..at + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
    };
    let mut out: Vec<Annotation> = Vec::new();
    let (mut time, mut chan, mut num) = (0i64, 0u8, 0i8);
    let mut pos = 0;
    while let Some(w) = word(pos) {
        let (code, interval) = (w >> 10, w & 0x3ff);
        pos += 2;
        match code {
            0 if interval == 0 => return Ok(out),
            SKIP => {
                // 32-bit interval, high 16-bit word first (PDP-11 order).
                let (hi, lo) = word(pos)
                    .zip(word(pos + 2))
                    .ok_or_else(|| err(pos, "SKIP without its 32-bit interval"))?;
                time += (((hi as u32) << 16) | lo as u32) as i32 as i64;
                pos += 4;
            }
            NUM | SUB | CHN | AUX => {
                let last = out
                    .last_mut()
                    .ok_or_else(|| err(pos - 2, "modifier before any annotation"))?;
                match code {
                    NUM => {
                        num = interval as u8 as i8;
                        last.num = num;
                    }
                    SUB => last.subtype = interval as u8 as i8,
                    CHN => {
                        chan = interval as u8;
                        last.chan = chan;
                    }
                    _ => {
                        let len = interval as usize;
                        let text = bytes
                            .get(pos..pos + len)
                            .ok_or_else(|| err(pos, "AUX string runs past the end"))?;
                        let text = text.split(|&b| b == 0).next().unwrap_or_default();
                        last.aux = Some(String::from_utf8_lossy(text).into_owned());
                        pos += len + (len & 1);
                    }
                }
            }
            // Code 0 with an interval is NOTQRS: no annotation type, it only moves time
            // (svdb files open with a time-resolution note, a SKIP back and a NOTQRS).
            0..=49 => {
                time += interval as i64;
                out.push(Annotation {
                    sample: time,
                    code: code as u8,
                    subtype: 0,
                    chan,
                    num,
                    aux: None,
                });
            }
            _ => return Err(err(pos - 2, &format!("unknown annotation code {code}"))),
        }
    }
    // Files normally end with a 0 word; a missing terminator after whole words is tolerated.
    if pos == bytes.len() {
        Ok(out)
    } else {
        Err(err(pos, "odd trailing byte"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(code: u16, interval: u16) -> [u8; 2] {
        ((code << 10) | interval).to_le_bytes()
    }

    #[test]
    fn decodes_modifiers_skip_and_aux() {
        let mut b = Vec::new();
        b.extend(w(28, 5)); // '+' at 5
        b.extend(w(AUX, 3));
        b.extend(*b"(VT\0");
        b.extend(w(SKIP, 0));
        b.extend(1u16.to_le_bytes()); // high word
        b.extend(2u16.to_le_bytes()); // low word: skip 65538
        b.extend(w(14, 1)); // '~'
        b.extend(w(SUB, 0x3ff)); // subtype -1
        b.extend(w(0, 0));
        let a = parse(Path::new("t.atr"), &b).unwrap();
        assert_eq!(a.len(), 2);
        assert_eq!(
            (a[0].sample, a[0].symbol(), a[0].aux.as_deref()),
            (5, "+", Some("(VT"))
        );
        assert_eq!(
            (a[1].sample, a[1].symbol(), a[1].subtype),
            (5 + 65538 + 1, "~", -1)
        );
    }

    #[test]
    fn truncated_aux_names_file_and_offset() {
        let mut b = Vec::new();
        b.extend(w(28, 5));
        b.extend(w(AUX, 10));
        b.extend(*b"(N");
        let e = parse(Path::new("t.atr"), &b).unwrap_err().to_string();
        assert!(e.contains("t.atr: byte 4") && e.contains("AUX"), "{e}");
    }
}
