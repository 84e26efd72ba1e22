//! Any bytes as a binary samples frame, for hellos of 0 to 16 ECG leads (the first byte picks
//! the count). It must never panic; a frame that parses re-encodes to the same bytes' shape.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&k, frame)) = data.split_first() else {
        return;
    };
    let leads = usize::from(k % 17);
    if let Ok(f) = holmes::protocol::parse_binary(frame, leads) {
        assert_eq!(holmes::protocol::encode_binary(&f).len(), frame.len());
    }
});
