//! The dragonfly schemes: the paths the tags give, and each scheme's choice against the
//! congestion it sees.

use std::collections::{BTreeMap, HashMap};

use ofan_topology::dragonfly::{GroupId, RouterId, RouterPort};
use ofan_topology::{Dragonfly, DragonflyShape};
use proptest::prelude::*;

use crate::lb::dragonfly::{next_hop, Congestion, DragonflyBalancer, DragonflyScheme, PathTag};
use crate::lb::LbRng;

/// Queues by (router, port); the deciding router's `local` view is its own entries.
struct Queues {
    at: RouterId,
    queues: HashMap<(RouterId, RouterPort), u64>,
    notified: HashMap<u32, u64>,
}

impl Default for Queues {
    fn default() -> Self {
        Self {
            at: RouterId(0),
            queues: HashMap::new(),
            notified: HashMap::new(),
        }
    }
}

impl Congestion for Queues {
    fn local(&self, port: RouterPort) -> u64 {
        self.anywhere(self.at, port)
    }
    fn notified(&self, channel: u32) -> u64 {
        self.notified.get(&channel).copied().unwrap_or(0)
    }
    fn anywhere(&self, router: RouterId, port: RouterPort) -> u64 {
        self.queues.get(&(router, port)).copied().unwrap_or(0)
    }
}

fn small() -> Dragonfly {
    Dragonfly::new(DragonflyShape::new(2, 4, 2).unwrap())
}

/// The routers a tagged packet visits from `src` to `dst`.
fn walk(dragonfly: &Dragonfly, src: RouterId, dst: RouterId, mut tag: PathTag) -> Vec<RouterId> {
    let mut path = vec![src];
    let mut at = src;
    while let Some(port) = next_hop(dragonfly, at, dst, &mut tag) {
        at = dragonfly.far_end(at, port).unwrap().router;
        path.push(at);
        assert!(path.len() <= 6, "a loop: {path:?}");
    }
    path
}

fn balancer(scheme: DragonflyScheme, dragonfly: &Dragonfly, router: RouterId) -> DragonflyBalancer {
    DragonflyBalancer::new(scheme, dragonfly, router, &mut LbRng::new(7))
}

#[test]
fn scheme_names_round_trip_and_unknown_ones_are_refused() {
    for scheme in DragonflyScheme::ALL {
        assert_eq!(scheme.name().parse::<DragonflyScheme>().unwrap(), scheme);
    }
    let error = "ugal".parse::<DragonflyScheme>().unwrap_err().to_string();
    assert!(error.contains("ugal-l"), "{error}");
}

proptest! {
    #[test]
    fn tags_give_the_topology_s_minimal_and_valiant_paths(
        x in 0u32..36, y in 0u32..36, v in 0u32..9
    ) {
        let dragonfly = small();
        let (src, dst) = (RouterId(x), RouterId(y));
        prop_assert_eq!(walk(&dragonfly, src, dst, PathTag::default()), dragonfly.minimal_path(src, dst));
        let via = GroupId(v);
        prop_assume!(via != dragonfly.group_of(src) && via != dragonfly.group_of(dst));
        prop_assert_eq!(
            walk(&dragonfly, src, dst, PathTag { via: Some(via) }),
            dragonfly.valiant_path(src, dst, via).unwrap()
        );
    }

    /// Over g − 1 packets to one group, the rotation uses every global channel of the source
    /// group exactly once: the direct link once and every other group once as intermediate.
    #[test]
    fn rotation_uses_every_global_channel_once_per_round(
        p in 1u16..=3, a in 1u16..=6, h in 1u16..=3, r in any::<u32>(), d in any::<u32>(), seed in any::<u64>()
    ) {
        let dragonfly = Dragonfly::new(DragonflyShape::new(p, a, h).unwrap());
        let shape = dragonfly.shape();
        prop_assume!(shape.groups() >= 3);
        let src = RouterId(r % shape.routers());
        let dst = RouterId(d % shape.routers());
        prop_assume!(dragonfly.group_of(src) != dragonfly.group_of(dst));
        let mut rng = LbRng::new(seed);
        let mut balancer = DragonflyBalancer::new(DragonflyScheme::Rotate, &dragonfly, src, &mut rng);
        let mut uses: BTreeMap<Option<GroupId>, u32> = BTreeMap::new();
        for _ in 0..shape.groups() - 1 {
            let tag = balancer.choose(&dragonfly, dst, 4096, &Queues::default(), &mut rng);
            *uses.entry(tag.via).or_default() += 1;
        }
        prop_assert_eq!(uses.len() as u32, shape.groups() - 1);
        prop_assert!(uses.values().all(|&n| n == 1));
        prop_assert!(uses.contains_key(&None));
    }
}

#[test]
fn valiant_draws_every_intermediate_group_and_never_an_end() {
    let dragonfly = small();
    let (src, dst) = (RouterId(0), RouterId(4 * 5 + 3));
    let mut rng = LbRng::new(1);
    let mut balancer = balancer(DragonflyScheme::Valiant, &dragonfly, src);
    let mut uses: BTreeMap<GroupId, u32> = BTreeMap::new();
    for _ in 0..7000 {
        let via = balancer
            .choose(&dragonfly, dst, 4096, &Queues::default(), &mut rng)
            .via
            .unwrap();
        *uses.entry(via).or_default() += 1;
    }
    assert_eq!(uses.len(), 7);
    assert!(!uses.contains_key(&GroupId(0)) && !uses.contains_key(&GroupId(5)));
    assert!(uses.values().all(|&n| (800..1200).contains(&n)), "{uses:?}");
    // Inside a group every scheme goes minimally.
    let tag = balancer.choose(&dragonfly, RouterId(3), 4096, &Queues::default(), &mut rng);
    assert_eq!(tag.via, None);
}

#[test]
fn ugal_l_detours_exactly_when_the_weighted_local_queue_is_longer() {
    let dragonfly = small();
    // Router 1 of group 0 to router 0 of group 1: minimal is local to router 0 (channel 0),
    // global, and lands on router 3 of group 1 (channel 7): 3 hops.
    let (src, dst) = (RouterId(1), RouterId(4));
    assert_eq!(dragonfly.minimal_hops(src, dst), 3);
    let min_port = dragonfly.next_port(src, dst).unwrap();
    let mut rng = LbRng::new(3);
    let mut ugal = balancer(DragonflyScheme::UgalL, &dragonfly, src);
    let mut queues = Queues {
        at: src,
        ..Queues::default()
    };
    assert_eq!(
        ugal.choose(&dragonfly, dst, 4096, &queues, &mut rng).via,
        None
    );
    // With only the minimal port loaded, any detour is cheaper.
    queues.queues.insert((src, min_port), 100_000);
    let via = ugal.choose(&dragonfly, dst, 4096, &queues, &mut rng).via;
    let via = via.expect("detours");
    // The detour's first port loaded to exactly the tie (q_min·H_min = q_nm·H_nm) keeps the
    // packet minimal; one byte less detours it again.
    let mut tag = PathTag { via: Some(via) };
    let detour_port = next_hop(&dragonfly, src, dst, &mut tag).unwrap();
    let hops_nm = u64::from(dragonfly.valiant_hops(src, dst, via));
    assert_ne!(detour_port, min_port);
    let tie = 100_000 * 3 / hops_nm;
    assert_eq!(tie * hops_nm, 300_000, "pick a queue that divides");
    queues.queues.insert((src, detour_port), tie);
    // Replay the same random candidate.
    let mut replay = LbRng::new(3);
    let mut again = balancer(DragonflyScheme::UgalL, &dragonfly, src);
    again.choose(
        &dragonfly,
        dst,
        4096,
        &Queues {
            at: src,
            ..Queues::default()
        },
        &mut replay,
    );
    assert_eq!(
        again
            .choose(&dragonfly, dst, 4096, &queues, &mut replay)
            .via,
        None
    );
    queues.queues.insert((src, detour_port), tie - 1);
    let mut replay = LbRng::new(3);
    let mut again = balancer(DragonflyScheme::UgalL, &dragonfly, src);
    again.choose(
        &dragonfly,
        dst,
        4096,
        &Queues {
            at: src,
            ..Queues::default()
        },
        &mut replay,
    );
    assert_eq!(
        again
            .choose(&dragonfly, dst, 4096, &queues, &mut replay)
            .via,
        Some(via)
    );
}

/// A congested global link held by another router of the group: UGAL-L cannot see it,
/// the framework's notification and UGAL-G can.
#[test]
fn remote_global_congestion_moves_arf_and_ugal_g_but_not_ugal_l() {
    let dragonfly = small();
    let (src, dst) = (RouterId(1), RouterId(4));
    let gateway = dragonfly.gateway(GroupId(0), GroupId(1));
    assert_ne!(gateway.router, src);
    let mut queues = Queues {
        at: src,
        ..Queues::default()
    };
    queues
        .queues
        .insert((gateway.router, gateway.port), 500_000);
    queues.notified.insert(0, 500_000);
    let detours = |scheme: DragonflyScheme, queues: &Queues| {
        let mut rng = LbRng::new(11);
        let mut balancer = balancer(scheme, &dragonfly, src);
        (0..100)
            .filter(|_| {
                balancer
                    .choose(&dragonfly, dst, 4096, queues, &mut rng)
                    .via
                    .is_some()
            })
            .count()
    };
    assert_eq!(detours(DragonflyScheme::Min, &queues), 0);
    assert_eq!(detours(DragonflyScheme::UgalL, &queues), 0);
    assert_eq!(detours(DragonflyScheme::ArfUgal, &queues), 100);
    assert_eq!(detours(DragonflyScheme::UgalG, &queues), 100);
    assert_eq!(detours(DragonflyScheme::UgalRotate, &queues), 0);
    // The notification of a different channel does not move the framework's packets.
    queues.notified.clear();
    queues.notified.insert(3, 500_000);
    assert_eq!(detours(DragonflyScheme::ArfUgal, &queues), 0);
}
