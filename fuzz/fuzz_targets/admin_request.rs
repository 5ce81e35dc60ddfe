//! Arbitrary bytes as what a client sends on the switch's admin socket
//! (`ofan_control::admin`): the bounded line reader, then the request parser. Checked: no
//! panic, the reader never takes more than `MAX_REQUEST_BYTES` + 1 bytes, every refusal is a
//! one-line JSON error, and an accepted line names a request that parses back.
#![no_main]

use std::io::{BufReader, Read};

use libfuzzer_sys::fuzz_target;
use ofan_control::admin::{read_request, Reply, Request, MAX_REQUEST_BYTES};

fuzz_target!(|data: &[u8]| {
    // A small buffer, as a slow client's bytes arrive in pieces.
    let mut reader = BufReader::with_capacity(7, data);
    let Ok(Some(line)) = read_request(&mut reader) else {
        return;
    };
    let consumed = data.len() - {
        let mut rest = Vec::new();
        reader.read_to_end(&mut rest).unwrap();
        rest.len()
    };
    assert!(consumed <= MAX_REQUEST_BYTES + 1);
    let reply = match line {
        Ok(text) => match Request::parse(&text) {
            Ok(request) => {
                assert_eq!(Request::parse(&request.line()).ok(), Some(request));
                return;
            }
            Err(refusal) => refusal,
        },
        Err(refusal) => refusal,
    };
    let Reply::Error(_) = &reply else {
        panic!("a refusal must be an error reply");
    };
    let line = reply.to_line();
    assert!(!line.contains('\n'));
    let value: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert!(value["error"].is_string());
});
