//! Who may report a link. A notification about link A→B is taken only from a neighbour entitled
//! to report it: A or B itself (a speaker tells its own links, [`super::speaker`]), or a
//! neighbour the remote path information names next to A or B (one whose next hops include
//! A or B). Anything else — a neighbour that passed the TTL-255 check speaking for a third
//! party's link — changes nothing: without this, any one-hop neighbour could set the state of
//! every link in the fabric.

use super::{LinkId, RemotePaths};

/// Whether the neighbour `sender` (its switch id: router ID in the switch, node id in the
/// model) may report `link`, given this switch's remote path information.
#[must_use]
pub fn entitled(sender: u32, link: LinkId, paths: &RemotePaths) -> bool {
    sender == link.near
        || sender == link.far
        || paths.hops().any(|hop| {
            hop.neighbour == sender
                && hop
                    .next_next
                    .iter()
                    .any(|&next| next == link.near || next == link.far)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arf::RemoteHop;
    use ofan_topology::DestKey;

    #[test]
    fn a_link_is_reported_by_its_ends_or_their_named_neighbours_only() {
        // Behind port 0: neighbour 100, whose next hops are 200 and 201.
        let mut paths = RemotePaths::new(2, 1);
        paths.set(
            DestKey(0),
            0,
            RemoteHop {
                neighbour: 100,
                next_next: vec![200, 201],
            },
        );
        let link = |near, far| LinkId { near, far };
        assert!(entitled(100, link(100, 200), &paths), "its own link");
        assert!(entitled(200, link(100, 200), &paths), "the far end");
        assert!(
            entitled(100, link(201, 300), &paths),
            "next to 201 by the path table"
        );
        assert!(
            !entitled(100, link(300, 301), &paths),
            "a third party's link"
        );
        assert!(
            !entitled(999, link(100, 200), &paths),
            "not a neighbour of it"
        );
    }
}
