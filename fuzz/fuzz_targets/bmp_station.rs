//! Arbitrary bytes as the stream a BGP daemon sends to the switch's BMP station
//! (`ofan_control::bmp`): framed into messages, each applied to the station's state, and the path
//! table derived after every batch. Checked: no panic, framing never loses or invents bytes, and
//! every learned next-next hop belongs to a neighbour that has paths.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ofan_control::bmp::rib::Rib;
use ofan_control::bmp::split_messages;

fuzz_target!(|data: &[u8]| {
    let mut rib = Rib::new(0.0);
    // Fed in two pieces, as TCP may deliver it.
    let cut = data.first().map_or(0, |&b| usize::from(b)).min(data.len());
    let mut buffer = Vec::new();
    for piece in [&data[..cut], &data[cut..]] {
        buffer.extend_from_slice(piece);
        let before = buffer.len();
        let Ok(messages) = split_messages(&mut buffer) else {
            return;
        };
        let taken: usize = messages.iter().map(|m| m.len()).sum();
        assert_eq!(taken + buffer.len(), before);
        for message in messages {
            let _ = rib.handle(message);
        }
        let learned = rib.learned();
        for neighbors in learned.routes.values() {
            assert!(!neighbors.is_empty());
        }
        let status = rib.status();
        assert!(status.errors <= status.messages);
    }
});
