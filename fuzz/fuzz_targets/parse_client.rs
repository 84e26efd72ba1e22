//! Any bytes as a text message: UTF-8 first (as the WebSocket layer does), then the parser.
//! It must never panic; whatever parses must survive a round trip.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data)
        && let Ok(msg) = holmes::protocol::parse_client(text)
    {
        let again = serde_json::to_string(&msg).expect("a parsed message serialises");
        assert!(holmes::protocol::parse_client(&again).is_ok(), "{again}");
    }
});
