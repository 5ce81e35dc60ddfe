//! Tests of the frame views and the fast-path parser.

use super::fixtures::*;
use super::*;
use proptest::prelude::*;

#[test]
fn captured_ipv4_udp_frame_parses() {
    let frame = captured_ipv4_udp();
    let parsed = parse(&frame).unwrap();
    assert_eq!(parsed.vlan, None);
    assert_eq!(parsed.ethertype, EtherType::IPV4);
    assert_eq!(parsed.version(), IpVersion::V4);
    assert_eq!(
        (parsed.l3_offset, parsed.l4_offset, parsed.l3_end),
        (14, 34, 14 + 0x73)
    );
    assert_eq!(parsed.src, "192.168.0.1".parse::<IpAddr>().unwrap());
    assert_eq!(parsed.dst, "192.168.0.199".parse::<IpAddr>().unwrap());
    assert_eq!(parsed.hop_limit, 64);
    assert_eq!(parsed.protocol, IpProtocol::UDP);
    assert_eq!(
        parsed.ports,
        Some(L4Ports {
            src: 53,
            dst: 58273
        })
    );
    let ip = Ipv4Packet::new_checked(&frame[14..]).unwrap();
    assert_eq!(ip.checksum(), 0xb861);
    assert!(ip.verify_checksum() && ip.dont_frag() && !ip.more_frags());
    assert_eq!((ip.ident(), ip.frag_offset(), ip.dscp_ecn()), (0, 0, 0));
    let eth = EthernetFrame::new_checked(&frame[..]).unwrap();
    assert_eq!(eth.dst_addr(), [0x00, 0x1b, 0x21, 0x3a, 0x4f, 0x5d]);
    assert_eq!(eth.src_addr(), [0x00, 0x0c, 0x29, 0x88, 0x77, 0x66]);
}

#[test]
fn ipv6_tcp_frame_parses() {
    let frame = ipv6_tcp_syn();
    let parsed = parse(&frame).unwrap();
    assert_eq!(parsed.version(), IpVersion::V6);
    assert_eq!(
        (parsed.l3_offset, parsed.l4_offset, parsed.l3_end),
        (14, 54, 74)
    );
    assert_eq!(parsed.src, "2001:db8::1".parse::<IpAddr>().unwrap());
    assert_eq!(parsed.dst, "2001:db8::2".parse::<IpAddr>().unwrap());
    assert_eq!((parsed.hop_limit, parsed.protocol), (64, IpProtocol::TCP));
    assert_eq!(
        parsed.ports,
        Some(L4Ports {
            src: 40000,
            dst: 5201
        })
    );
    let ip = Ipv6Packet::new_checked(&frame[14..]).unwrap();
    assert_eq!(
        (ip.traffic_class(), ip.flow_label(), ip.payload_len()),
        (0, 0, 20)
    );
}

#[test]
fn vlan_tagged_frame_parses_with_tag() {
    let frame = tagged(&captured_ipv4_udp(), 0xa00a); // PCP 5, VID 10
    let parsed = parse(&frame).unwrap();
    let tag = parsed.vlan.unwrap();
    assert_eq!((tag.pcp(), tag.dei(), tag.vid()), (5, false, 10));
    assert_eq!((parsed.l3_offset, parsed.l4_offset), (18, 38));
    assert_eq!(
        parsed.ports,
        Some(L4Ports {
            src: 53,
            dst: 58273
        })
    );
    // The flow hash does not depend on the tag.
    assert_eq!(
        parsed.flow_hash(),
        parse(&captured_ipv4_udp()).unwrap().flow_hash()
    );
}

#[test]
fn ethernet_padding_after_the_packet_is_ignored() {
    let mut frame = ipv4_udp([10, 0, 0, 1].into(), [10, 0, 1, 1].into(), 64, (1, 2), 0);
    assert_eq!(frame.len(), 42);
    frame.resize(60, 0);
    let parsed = parse(&frame).unwrap();
    assert_eq!(parsed.l3_end, 42);
    assert_eq!(parsed.ports, Some(L4Ports { src: 1, dst: 2 }));
}

#[test]
fn ports_need_the_whole_l4_header() {
    // IPv4 total length covers only 4 bytes of the UDP header.
    let mut frame = ipv4_udp([10, 0, 0, 1].into(), [10, 0, 1, 1].into(), 64, (1, 2), 0);
    frame[16..18].copy_from_slice(&24u16.to_be_bytes());
    refill_ipv4_checksum(&mut frame, 14);
    assert_eq!(parse(&frame).unwrap().ports, None);
    // ICMP has no ports.
    frame[23] = 1;
    refill_ipv4_checksum(&mut frame, 14);
    assert_eq!(parse(&frame).unwrap().ports, None);
    // IPv6 with a hop-by-hop header first: no extension-header walk, no ports.
    let mut frame = ipv6_tcp_syn();
    frame[20] = 0;
    let parsed = parse(&frame).unwrap();
    assert_eq!((parsed.protocol, parsed.ports), (IpProtocol(0), None));
}

#[test]
fn every_parse_error_is_reachable() {
    let v4 = captured_ipv4_udp();
    let v6 = ipv6_tcp_syn();
    let with = |base: &[u8], edit: &dyn Fn(&mut Vec<u8>)| {
        let mut frame = base.to_vec();
        edit(&mut frame);
        parse(&frame)
    };
    let fix = |frame: &mut Vec<u8>| refill_ipv4_checksum(frame, 14);
    assert_eq!(parse(&v4[..13]), Err(ParseError::Truncated));
    assert_eq!(parse(&v4[..33]), Err(ParseError::Truncated));
    assert_eq!(parse(&tagged(&v4, 1)[..17]), Err(ParseError::Truncated));
    assert_eq!(parse(&v6[..53]), Err(ParseError::Truncated));
    assert_eq!(
        with(&v4, &|f| f[12..14].copy_from_slice(&[0x08, 0x06])),
        Err(ParseError::UnknownEtherType)
    );
    assert_eq!(
        parse(&tagged(&tagged(&v4, 1), 2)),
        Err(ParseError::UnsupportedVlan)
    );
    assert_eq!(
        with(&v4, &|f| f[12..14].copy_from_slice(&[0x88, 0xa8])),
        Err(ParseError::UnsupportedVlan)
    );
    assert_eq!(
        with(&v4, &|f| f[12..14].copy_from_slice(&[0x86, 0xdd])),
        Err(ParseError::BadVersion)
    );
    assert_eq!(
        with(&v6, &|f| f[12..14].copy_from_slice(&[0x08, 0x00])),
        Err(ParseError::BadVersion)
    );
    assert_eq!(
        with(&v4, &|f| {
            f[14] = 0x44;
            fix(f)
        }),
        Err(ParseError::BadIpv4Header)
    );
    assert_eq!(
        with(&v4, &|f| {
            f[16..18].copy_from_slice(&[0, 19]);
            fix(f)
        }),
        Err(ParseError::BadIpv4Header)
    );
    assert_eq!(
        with(&v4, &|f| {
            f[16..18].copy_from_slice(&[0, 0x74]);
            fix(f)
        }),
        Err(ParseError::BadIpv4Header)
    );
    assert_eq!(
        with(&v4, &|f| {
            f[14] = 0x46;
            fix(f)
        }),
        Err(ParseError::Ipv4Options)
    );
    assert_eq!(with(&v4, &|f| f[25] ^= 1), Err(ParseError::BadIpv4Checksum));
    assert_eq!(
        with(&v4, &|f| {
            f[20] |= 0x20;
            fix(f)
        }),
        Err(ParseError::Fragment)
    );
    assert_eq!(
        with(&v4, &|f| {
            f[21] = 1;
            fix(f)
        }),
        Err(ParseError::Fragment)
    );
    assert_eq!(with(&v6, &|f| f[19] = 21), Err(ParseError::BadIpv6Header));
}

#[test]
fn parse_error_indices_and_names_are_distinct() {
    let mut names = std::collections::HashSet::new();
    for (index, error) in ParseError::ALL.into_iter().enumerate() {
        assert_eq!(error.as_index(), index);
        assert!(names.insert(error.name()));
        assert!(error
            .name()
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'));
    }
    // The messages are the variants' own (`#[error]`), not their metric names.
    assert_eq!(ParseError::Truncated.to_string(), "frame truncated");
    assert_eq!(ParseError::Fragment.to_string(), "IPv4 fragment");
}

#[test]
fn every_prefix_of_a_frame_parses_or_errs_without_panic() {
    for base in [
        captured_ipv4_udp(),
        ipv6_tcp_syn(),
        tagged(&captured_ipv4_udp(), 7),
    ] {
        for len in 0..base.len() {
            let _ = parse(&base[..len]);
        }
    }
}

#[test]
fn rfc1624_example_gives_zero_not_ffff() {
    // RFC 1624 §4: HC = 0xDD2F, m = 0x5555, m' = 0x3285 → HC' = 0x0000 by eqn. 3 (eqn. 2
    // would give 0xFFFF).
    assert_eq!(checksum::update(0xDD2F, 0x5555, 0x3285), 0x0000);
}

#[test]
fn forward_rewrite_sets_macs_and_decrements_ttl() {
    let mut frame = captured_ipv4_udp();
    let parsed = parse(&frame).unwrap();
    forward_rewrite(
        &mut frame,
        0,
        parsed.l3_offset,
        parsed.version(),
        [2, 0, 0, 0, 0, 1],
        [2, 0, 0, 0, 0, 2],
    );
    let eth = EthernetFrame::new_checked(&frame[..]).unwrap();
    assert_eq!(
        (eth.src_addr(), eth.dst_addr()),
        ([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
    );
    let after = parse(&frame).unwrap();
    assert_eq!(after.hop_limit, 63);
    // TTL 64 → 63 lowers the TTL/protocol word by 0x0100; the checksum rises by 0x0100.
    assert_eq!(
        Ipv4Packet::new_checked(&frame[14..]).unwrap().checksum(),
        0xb961
    );

    let mut frame = ipv6_tcp_syn();
    let parsed = parse(&frame).unwrap();
    forward_rewrite(
        &mut frame,
        0,
        parsed.l3_offset,
        parsed.version(),
        [2, 0, 0, 0, 0, 1],
        [2, 0, 0, 0, 0, 2],
    );
    assert_eq!(parse(&frame).unwrap().hop_limit, 63);
}

/// An untagged IPv4 frame, header only, with this DSCP/ECN byte and a correct checksum.
fn ipv4_frame_with_tos(tos: u8) -> Vec<u8> {
    let mut frame = vec![0u8; 14 + 20];
    frame[12..14].copy_from_slice(&EtherType::IPV4.0.to_be_bytes());
    let ip = &mut frame[14..];
    ip[0] = 0x45;
    ip[1] = tos;
    ip[2..4].copy_from_slice(&20u16.to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[10, 0, 0, 1]);
    ip[16..20].copy_from_slice(&[10, 1, 0, 3]);
    Ipv4Packet::new_unchecked(ip).fill_checksum();
    frame
}

#[test]
fn mark_ce_marks_ect_ipv4_and_keeps_the_checksum_valid() {
    for tos in [0b01u8, 0b10, 0xb8 | 0b10] {
        for tci in [None, Some(7)] {
            let untagged = ipv4_frame_with_tos(tos);
            let mut frame = match tci {
                Some(tci) => tagged(&untagged, tci),
                None => untagged,
            };
            let l3 = frame.len() - 20;
            assert!(ecn(&frame, 0).is_some_and(Ecn::is_capable));
            assert!(mark_ce(&mut frame, 0));
            assert_eq!(ecn(&frame, 0), Some(Ecn::Ce));
            assert_eq!(frame[l3 + 1] & !0b11, tos & !0b11, "DSCP kept");
            let mut ip = Ipv4Packet::new_checked(&mut frame[l3..]).unwrap();
            assert!(ip.verify_checksum(), "tos {tos:#x}");
            let incremental = ip.checksum();
            ip.fill_checksum();
            assert_eq!(incremental, ip.checksum(), "tos {tos:#x}");
            // Already marked: nothing changes.
            assert!(!mark_ce(&mut frame, 0));
        }
    }
}

#[test]
fn every_dscp_ecn_byte_still_parses_to_the_same_facts_once_marked() {
    for tos in 0..=255u8 {
        let mut frame = captured_ipv4_udp();
        frame[15] = tos;
        refill_ipv4_checksum(&mut frame, 14);
        let parsed = parse(&frame).unwrap();
        let changed = mark_ce(&mut frame, 0);
        assert_eq!(changed, matches!(tos & 0b11, 0b01 | 0b10), "tos {tos:#x}");
        assert_eq!(parse(&frame), Ok(parsed), "tos {tos:#x}");
        assert_eq!(frame[15], if tos & 0b11 == 0 { tos } else { tos | 0b11 });
    }
}

#[test]
fn mark_ce_leaves_not_ect_and_non_ip_alone() {
    let mut frame = ipv4_frame_with_tos(0);
    assert_eq!(ecn(&frame, 0), Some(Ecn::NotEct));
    assert!(!ecn(&frame, 0).is_some_and(Ecn::is_capable));
    assert!(!mark_ce(&mut frame, 0));
    assert_eq!(frame, ipv4_frame_with_tos(0));
    let mut arp = vec![0u8; 42];
    arp[12..14].copy_from_slice(&EtherType::ARP.0.to_be_bytes());
    assert_eq!(ecn(&arp, 0), None);
    assert!(!mark_ce(&mut arp, 0));
    assert!(!mark_ce(&mut [0u8; 5], 0));
}

#[test]
fn mark_ce_marks_the_ipv6_traffic_class() {
    let mut frame = vec![0u8; 14 + 40];
    frame[12..14].copy_from_slice(&EtherType::IPV6.0.to_be_bytes());
    frame[14] = 0x60;
    frame[15] = 0b0010_0000; // ECT(0) in the traffic class's low bits
    assert_eq!(ecn(&frame, 0), Some(Ecn::Ect0));
    assert!(mark_ce(&mut frame, 0));
    assert_eq!(ecn(&frame, 0), Some(Ecn::Ce));
    assert_eq!(
        (frame[14], frame[15]),
        (0x60, 0b0011_0000),
        "version and flow label kept"
    );
}

#[test]
fn ecn_codepoints_round_trip() {
    for bits in 0..4u8 {
        assert_eq!(Ecn::from_bits(bits).bits(), bits);
        assert_eq!(Ecn::from_bits(bits).is_capable(), bits != 0);
    }
    assert_eq!(
        Ecn::from_bits(0b1111_1110),
        Ecn::Ect0,
        "only the two low bits count"
    );
}

#[test]
fn flow_hash_depends_on_every_field_and_spreads() {
    let base = ipv4_udp(
        [10, 0, 0, 1].into(),
        [10, 1, 0, 1].into(),
        64,
        (1000, 2000),
        10,
    );
    let hash = |edit: &dyn Fn(&mut Vec<u8>)| {
        let mut frame = base.clone();
        edit(&mut frame);
        refill_ipv4_checksum(&mut frame, 14);
        parse(&frame).unwrap().flow_hash()
    };
    let h0 = hash(&|_| {});
    assert_ne!(h0, hash(&|f| f[29] ^= 1), "source address");
    assert_ne!(h0, hash(&|f| f[33] ^= 1), "destination address");
    assert_ne!(h0, hash(&|f| f[35] ^= 1), "source port");
    assert_ne!(h0, hash(&|f| f[37] ^= 1), "destination port");
    assert_ne!(h0, hash(&|f| f[23] = 6), "protocol");
    assert_eq!(h0, hash(&|f| f[22] = 9), "TTL is not part of the flow");

    // Sequential source ports over 64 buckets: every bucket within ±25 % of the mean.
    let mut buckets = [0u32; 64];
    for port in 0..65_536u32 {
        let h = flow_hash_v4(
            [10, 0, 0, 1].into(),
            [10, 1, 0, 1].into(),
            IpProtocol::UDP,
            Some(L4Ports {
                src: port as u16,
                dst: 4791,
            }),
        );
        buckets[(h % 64) as usize] += 1;
    }
    assert!(
        buckets.iter().all(|&n| (768..=1280).contains(&n)),
        "{buckets:?}"
    );
    let mut buckets = [0u32; 64];
    for host in 0..65_536u32 {
        let src = Ipv6Addr::from(0xfd00_u128 << 112 | u128::from(host));
        let h = flow_hash_v6(src, "fd00::1".parse().unwrap(), IpProtocol::TCP, None);
        buckets[(h >> 26) as usize] += 1;
    }
    assert!(
        buckets.iter().all(|&n| (768..=1280).contains(&n)),
        "{buckets:?}"
    );
}

/// A random IPv4 header without options and with a correct checksum.
fn header_strategy() -> impl Strategy<Value = [u8; 20]> {
    any::<[u8; 20]>().prop_map(|mut header| {
        header[0] = 0x45;
        let mut packet = Ipv4Packet::new_unchecked(&mut header[..]);
        packet.fill_checksum();
        header
    })
}

/// Sets the identification field so that the header's sum without the checksum is `0xFFFF`
/// (checksum `0x0000`), with the TTL as it is now.
fn force_zero_checksum(header: &mut [u8; 20]) {
    header[4..6].copy_from_slice(&[0, 0]);
    header[10..12].copy_from_slice(&[0, 0]);
    let sum = checksum::ones_complement_sum(header);
    header[4..6].copy_from_slice(&(0xFFFF - sum).to_be_bytes());
    Ipv4Packet::new_unchecked(&mut header[..]).fill_checksum();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

    /// RFC 1624: the incremental update after a TTL decrement equals a full recomputation.
    #[test]
    fn incremental_ttl_checksum_equals_full_recomputation(mut header in header_strategy()) {
        let mut packet = Ipv4Packet::new_unchecked(&mut header[..]);
        let ttl = packet.ttl();
        prop_assert_eq!(packet.decrement_ttl(), ttl.wrapping_sub(1));
        let incremental = packet.checksum();
        packet.fill_checksum();
        prop_assert_eq!(incremental, packet.checksum());
        prop_assert!(packet.verify_checksum());
    }

    /// RFC 1624 §3 corner cases: the checksum is 0x0000 before the decrement, or must become
    /// 0x0000 after it (where eqn. 2 would give 0xFFFF).
    #[test]
    fn incremental_checksum_corner_cases(mut header in header_strategy(), before in any::<bool>()) {
        header[8] = header[8].max(2);
        if before {
            force_zero_checksum(&mut header);
            prop_assert_eq!(Ipv4Packet::new_unchecked(&header[..]).checksum(), 0x0000);
        } else {
            header[8] -= 1;
            force_zero_checksum(&mut header);
            header[8] += 1;
            Ipv4Packet::new_unchecked(&mut header[..]).fill_checksum();
        }
        let mut packet = Ipv4Packet::new_unchecked(&mut header[..]);
        packet.decrement_ttl();
        let incremental = packet.checksum();
        packet.fill_checksum();
        prop_assert_eq!(incremental, packet.checksum());
        if !before {
            prop_assert_eq!(incremental, 0x0000);
        }
    }

    /// Marking CE updates the checksum exactly as a full recomputation would, and touches only
    /// the ECN bits and the checksum.
    #[test]
    fn incremental_ecn_checksum_equals_full_recomputation(mut header in header_strategy()) {
        let before = header;
        let mut packet = Ipv4Packet::new_unchecked(&mut header[..]);
        let ecn = packet.ecn();
        packet.set_ecn(Ecn::Ce);
        prop_assert_eq!(packet.ecn(), Ecn::Ce);
        let incremental = packet.checksum();
        packet.fill_checksum();
        prop_assert_eq!(incremental, packet.checksum());
        for index in (0..20).filter(|&i| i != 1 && i != 10 && i != 11) {
            prop_assert_eq!(header[index], before[index]);
        }
        prop_assert_eq!(header[1] & !0b11, before[1] & !0b11);
        prop_assert_eq!(Ecn::from_bits(before[1]), ecn);
    }

    /// Writing a DSCP (the dragonfly path tag) updates the checksum exactly as a full
    /// recomputation would and keeps the ECN bits.
    #[test]
    fn incremental_dscp_checksum_equals_full_recomputation(
        mut header in header_strategy(),
        dscp in 0u8..64,
    ) {
        let before = header;
        let mut packet = Ipv4Packet::new_unchecked(&mut header[..]);
        packet.set_dscp(dscp);
        prop_assert_eq!(packet.dscp_ecn() >> 2, dscp);
        let incremental = packet.checksum();
        packet.fill_checksum();
        prop_assert_eq!(incremental, packet.checksum());
        prop_assert_eq!(header[1] & 0b11, before[1] & 0b11);
        for index in (0..20).filter(|&i| i != 1 && i != 10 && i != 11) {
            prop_assert_eq!(header[index], before[index]);
        }
    }

    /// The update of any word of any correctly summed data equals a full recomputation.
    #[test]
    fn update_of_any_word_equals_recomputation(mut data in any::<[u8; 20]>(), word in 0usize..9, new in any::<u16>()) {
        // Words 0..9 exclude the checksum word at 10..12 (index 5); shift past it.
        let word = if word >= 5 { word + 1 } else { word };
        data[10..12].copy_from_slice(&[0, 0]);
        let sum = checksum::checksum(&data);
        data[10..12].copy_from_slice(&sum.to_be_bytes());
        let old = u16::from_be_bytes([data[2 * word], data[2 * word + 1]]);
        data[2 * word..2 * word + 2].copy_from_slice(&new.to_be_bytes());
        data[10..12].copy_from_slice(&[0, 0]);
        prop_assert_eq!(checksum::update(sum, old, new), checksum::checksum(&data));
    }

    /// The word-at-a-time sum equals RFC 1071's definition: big-endian 16-bit words, an odd last
    /// byte padded with a zero byte, end-around carry.
    #[test]
    fn ones_complement_sum_matches_the_definition(data in proptest::collection::vec(any::<u8>(), 0..80)) {
        let mut sum = 0u32;
        for word in data.chunks(2) {
            sum += u32::from(u16::from_be_bytes([word[0], *word.get(1).unwrap_or(&0)]));
            sum = (sum & 0xFFFF) + (sum >> 16);
        }
        prop_assert_eq!(checksum::ones_complement_sum(&data), sum as u16);
    }

    /// Reading and marking ECN never panic on arbitrary bytes, and a frame the fast path accepts
    /// still parses, to the same facts, once marked.
    #[test]
    fn arbitrary_bytes_mark_without_panic(frame in proptest::collection::vec(any::<u8>(), 0..200)) {
        let mut marked = frame.clone();
        let changed = mark_ce(&mut marked, 0);
        prop_assert_eq!(changed, marked != frame);
        prop_assert!(!changed || ecn(&marked, 0) == Some(Ecn::Ce));
        if let Ok(parsed) = parse(&frame) {
            prop_assert_eq!(parse(&marked), Ok(parsed));
        }
    }

    /// Arbitrary bytes never make the parser panic, and accepted frames satisfy its contract.
    #[test]
    fn arbitrary_bytes_parse_without_panic(frame in proptest::collection::vec(any::<u8>(), 0..200)) {
        if let Ok(parsed) = parse(&frame) {
            prop_assert!(parsed.l3_offset < parsed.l4_offset);
            prop_assert!(parsed.l4_offset <= parsed.l3_end && parsed.l3_end <= frame.len());
        }
    }
}

#[test]
fn a_jumbo_frame_parses_from_its_first_buffer() {
    let v4 = ipv4_udp(
        Ipv4Addr::new(10, 0, 0, 1),
        Ipv4Addr::new(10, 1, 0, 2),
        64,
        (4791, 4791),
        9000 - 28,
    );
    let v6 = ipv6_udp(
        "fd00::1".parse().unwrap(),
        "fd00::2".parse().unwrap(),
        64,
        (4791, 4791),
        9000 - 48,
    );
    for frame in [v4, v6] {
        assert_eq!(frame.len(), 9014);
        let head = &frame[..3840];
        assert_eq!(parse_head(head, frame.len()), parse(&frame));
        assert!(parse_head(head, frame.len()).unwrap().ports.is_some());
        // The headers' lengths still bind: the first buffer alone is not the packet, and a
        // packet shorter than its headers say is refused.
        assert!(parse(head).is_err());
        assert!(parse_head(head, frame.len() - 1).is_err());
    }
    // Headers cut by the end of the first buffer: ports are read only where the buffer has them.
    let v4 = ipv4_udp(
        Ipv4Addr::new(10, 0, 0, 1),
        Ipv4Addr::new(10, 1, 0, 2),
        64,
        (1, 2),
        100,
    );
    let parsed = parse_head(&v4[..36], v4.len()).unwrap();
    assert_eq!(parsed.ports, None);
}

#[test]
fn a_jumbo_frame_is_rewritten_and_marked_in_its_first_buffer() {
    let mut frame = ipv4_udp(
        Ipv4Addr::new(10, 0, 0, 1),
        Ipv4Addr::new(10, 1, 0, 2),
        64,
        (4791, 4791),
        9000 - 28,
    );
    frame[15] = 0b10; // ECT(0)
    refill_ipv4_checksum(&mut frame, 14);
    let len = frame.len();
    let tail = frame[3840..].to_vec();
    let head = &mut frame[..3840];
    // The first buffer alone is no packet: nothing can be read or marked without the length.
    assert_eq!(ecn(head, 0), None);
    assert_eq!(ecn(head, len), Some(Ecn::Ect0));
    assert!(mark_ce(head, len));
    assert_eq!(ecn(head, len), Some(Ecn::Ce));
    let (mac_a, mac_b): (MacAddr, MacAddr) = ([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
    forward_rewrite(head, len, 14, IpVersion::V4, mac_a, mac_b);
    let parsed = parse(&frame).unwrap();
    assert_eq!(
        parsed.hop_limit, 63,
        "TTL decremented through the first buffer"
    );
    assert_eq!(frame[..6], mac_b);
    assert_eq!(frame[3840..], tail[..], "past the first buffer untouched");
    let ip = Ipv4Packet::new_checked(&frame[14..]).unwrap();
    assert!(ip.verify_checksum(), "checksum kept valid");
}
