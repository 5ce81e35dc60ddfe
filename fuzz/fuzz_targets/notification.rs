//! Arbitrary bytes as a congestion notification datagram (`ofan_control::notify::wire`).
//! Checked: no panic; whatever parses emits back to exactly the same bytes (the format has one
//! encoding per message), and a refusal is one of the named errors.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ofan_control::notify::wire::Notification;

fuzz_target!(|data: &[u8]| {
    if let Ok(message) = Notification::parse(data) {
        let mut buffer = [0u8; 64];
        let len = message
            .emit(&mut buffer)
            .expect("a parsed message fits 64 bytes");
        assert_eq!(
            &buffer[..len],
            data,
            "parse then emit must give the same bytes"
        );
    }
});
