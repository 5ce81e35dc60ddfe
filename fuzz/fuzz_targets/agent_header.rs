//! Arbitrary bytes as the UDP payload a host agent receives (`ofan_lab_agent::wire`): the
//! header parser, and the ACK the receiver would build from a DATA header. Checked: no panic,
//! a parsed header writes back to the same 18 bytes, and an ACK keeps the collective, flow,
//! sequence, entropy and copy number of the DATA it answers.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ofan_lab_agent::wire::{Header, Kind, HEADER_LEN};

fuzz_target!(|data: &[u8]| {
    let Ok(header) = Header::parse(data) else {
        return;
    };
    let mut written = [0u8; HEADER_LEN];
    header.write(&mut written);
    assert_eq!(written[..], data[..HEADER_LEN]);
    assert_eq!(Header::parse(&written), Ok(header));
    if header.kind == Kind::Data {
        let tos = data.get(HEADER_LEN).copied();
        let ack = header.ack(tos);
        assert_eq!(ack.kind, Kind::Ack);
        assert_eq!(
            (
                ack.collective,
                ack.flow,
                ack.sequence,
                ack.entropy,
                ack.flags.copy()
            ),
            (
                header.collective,
                header.flow,
                header.sequence,
                header.entropy,
                header.flags.copy()
            )
        );
    }
});
