//! The socket against the kernel of the test's own network namespace, read-only (no root
//! needed): a dump, a get with its acknowledgement, and a refused request with its errno.

use std::time::Duration;

use ofan_netlink::{
    dump_request, get_link_request, parse_link, parse_link_xdp, set_link_up_request, Dump,
    QueryError, RouteSocket, RTM_NEWLINK,
};

const TIMEOUT: Duration = Duration::from_secs(5);

#[test]
fn a_link_dump_lists_the_loopback() {
    let mut socket = RouteSocket::open().unwrap();
    let mut links = Vec::new();
    socket
        .query(
            |seq| dump_request(Dump::Links, seq),
            TIMEOUT,
            |message| {
                if message.kind == RTM_NEWLINK {
                    links.extend(parse_link(message.payload));
                }
            },
        )
        .unwrap();
    assert!(
        links
            .iter()
            .any(|link| link.index == 1 && link.name == "lo"),
        "{links:?}"
    );
}

#[test]
fn a_get_answers_one_link_then_acknowledges() {
    let mut socket = RouteSocket::open().unwrap();
    let mut answers = Vec::new();
    socket
        .query(
            |seq| get_link_request(seq, 1),
            TIMEOUT,
            |message| {
                answers.push((
                    message.kind,
                    parse_link(message.payload).map(|link| link.name),
                    parse_link_xdp(message.payload).is_some(),
                ));
            },
        )
        .unwrap();
    assert_eq!(answers, [(RTM_NEWLINK, Some("lo".to_owned()), true)]);
}

#[test]
fn a_refused_request_returns_the_kernels_errno() {
    let mut socket = RouteSocket::open().unwrap();
    // No such interface: ENODEV as root, EPERM without CAP_NET_ADMIN; either is the kernel's.
    let error = socket
        .query(
            |seq| set_link_up_request(seq, 0x7fff_fff0, true),
            TIMEOUT,
            |_| {},
        )
        .unwrap_err();
    let QueryError::Refused(errno) = error else {
        panic!("not refused by the kernel: {error}");
    };
    assert!(matches!(
        errno.raw_os_error(),
        Some(libc::ENODEV | libc::EPERM)
    ));
    // The same through `request`: the errno as an io::Error.
    let error = socket
        .request(|seq| set_link_up_request(seq, 0x7fff_fff0, true), TIMEOUT)
        .unwrap_err();
    assert!(matches!(
        error.raw_os_error(),
        Some(libc::ENODEV | libc::EPERM)
    ));
}
