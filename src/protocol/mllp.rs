//! MLLP framing (HL7's Minimal Lower Layer Protocol) as a `tokio_util` codec: a frame is
//! `0x0B`, the message, `0x1C 0x0D`. Frames are bounded both ways (`hl7.max_frame_bytes`): a
//! peer that sends a longer one, or bytes outside a frame, is an error the link answers by
//! closing the connection, so a misbehaving receiver holds at most one frame's worth of memory.

use tokio_util::bytes::{Buf, BufMut, BytesMut};
use tokio_util::codec::{Decoder, Encoder};

const START: u8 = 0x0B;
const END: [u8; 2] = [0x1C, 0x0D];

#[derive(Debug, thiserror::Error)]
pub(crate) enum MllpError {
    #[error("a frame longer than {max} bytes")]
    TooLong { max: usize },
    #[error("byte {0:#04x} outside a frame")]
    Garbage(u8),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// The codec: decodes frames' contents, encodes a message into a frame.
#[derive(Debug)]
pub(crate) struct Mllp {
    max: usize,
    /// Bytes of the current frame already searched for its end.
    scanned: usize,
}

impl Mllp {
    pub(crate) fn new(max_frame_bytes: usize) -> Mllp {
        Mllp {
            max: max_frame_bytes,
            scanned: 0,
        }
    }
}

impl Decoder for Mllp {
    type Item = BytesMut;
    type Error = MllpError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<BytesMut>, MllpError> {
        // Line ends between frames are tolerated (some receivers send them).
        while let Some(&b) = src.first() {
            match b {
                START => break,
                b'\r' | b'\n' => src.advance(1),
                other => return Err(MllpError::Garbage(other)),
            }
        }
        if src.is_empty() {
            return Ok(None);
        }
        let from = self.scanned.max(1);
        match src[from..].windows(2).position(|w| w == END) {
            Some(i) => {
                let end = from + i;
                if end - 1 > self.max {
                    return Err(MllpError::TooLong { max: self.max });
                }
                let mut frame = src.split_to(end + END.len());
                frame.advance(1);
                frame.truncate(frame.len() - END.len());
                self.scanned = 0;
                Ok(Some(frame))
            }
            None => {
                // The frame's contents so far: all but the start byte, and but a last byte
                // that may be the first of the end marker.
                let body = src.len() - 1 - usize::from(src.last() == Some(&END[0]));
                if body > self.max {
                    return Err(MllpError::TooLong { max: self.max });
                }
                // The last byte may be the first of the end marker.
                self.scanned = src.len() - 1;
                Ok(None)
            }
        }
    }
}

impl Encoder<&[u8]> for Mllp {
    type Error = MllpError;

    fn encode(&mut self, msg: &[u8], dst: &mut BytesMut) -> Result<(), MllpError> {
        if msg.len() > self.max {
            return Err(MllpError::TooLong { max: self.max });
        }
        dst.reserve(msg.len() + 3);
        dst.put_u8(START);
        dst.put_slice(msg);
        dst.put_slice(&END);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(body: &[u8]) -> Vec<u8> {
        let mut v = vec![START];
        v.extend_from_slice(body);
        v.extend_from_slice(&END);
        v
    }

    #[test]
    fn frames_round_trip_and_split_reads_join() {
        let mut c = Mllp::new(64);
        let mut out = BytesMut::new();
        c.encode(b"MSH|a\rMSA|AA|1".as_slice(), &mut out).unwrap();
        assert_eq!(&out[..], frame(b"MSH|a\rMSA|AA|1").as_slice());
        // Two frames, fed a byte at a time, with a line end between them.
        let mut wire = frame(b"one");
        wire.extend_from_slice(b"\r\n");
        wire.extend(frame(b"two\x1c"));
        let mut buf = BytesMut::new();
        let mut got = Vec::new();
        for b in wire {
            buf.put_u8(b);
            while let Some(f) = c.decode(&mut buf).unwrap() {
                got.push(f.to_vec());
            }
        }
        assert_eq!(got, [b"one".to_vec(), b"two\x1c".to_vec()]);
        assert!(buf.is_empty());
    }

    #[test]
    fn a_long_frame_and_bytes_outside_a_frame_are_errors() {
        let mut c = Mllp::new(8);
        let mut buf = BytesMut::from(&[START][..]);
        buf.extend_from_slice(&[b'x'; 9]);
        assert!(matches!(
            c.decode(&mut buf),
            Err(MllpError::TooLong { max: 8 })
        ));
        // Complete but too long.
        let mut c = Mllp::new(8);
        let mut buf = BytesMut::from(frame(&[b'x'; 9]).as_slice());
        assert!(matches!(c.decode(&mut buf), Err(MllpError::TooLong { .. })));
        let mut buf = BytesMut::from(frame(&[b'x'; 8]).as_slice());
        assert_eq!(&c.decode(&mut buf).unwrap().unwrap()[..], &[b'x'; 8]);
        let mut buf = BytesMut::from(&b"HTTP/1.1 400"[..]);
        assert!(matches!(c.decode(&mut buf), Err(MllpError::Garbage(b'H'))));
        let mut out = BytesMut::new();
        assert!(c.encode([0u8; 9].as_slice(), &mut out).is_err());
    }

    #[test]
    fn a_frame_of_exactly_the_maximum_split_between_its_end_bytes_is_accepted() {
        let mut c = Mllp::new(8);
        let wire = frame(&[b'x'; 8]);
        let (head, tail) = wire.split_at(wire.len() - 1);
        let mut buf = BytesMut::from(head);
        assert!(c.decode(&mut buf).unwrap().is_none());
        buf.extend_from_slice(tail);
        assert_eq!(&c.decode(&mut buf).unwrap().unwrap()[..], &[b'x'; 8]);
        assert!(buf.is_empty());
    }
}
