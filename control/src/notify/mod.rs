//! Adaptive-routing congestion notifications (the framework draft's "Congestion Notify"):
//! [`wire`] is the message format and its one codec, [`speaker`] the pure state machine (who is
//! told what and when, and which datagrams are refused), [`transport`] the UDP socket (TTL 255
//! out, TTL and arrival interface in), [`report`] what `stats` shows, [`host`] what a
//! multi-plane host makes of the notifications its edge switches pass on (the endpoint
//! plane). Detection, the congestion
//! table and the path-quality view are pure and shared with the model:
//! [`ofan_dataplane::arf`].

pub mod host;
pub mod report;
pub mod speaker;
pub mod transport;
pub mod wire;

pub use ofan_dataplane::arf::detect;

/// The UDP port notifications use unless configured otherwise (`adaptive_routing.port`). Not
/// one of the fabric protocols' well-known ports (RoCEv2 is 4791, VXLAN 4789, BFD 3784/4784).
pub const DEFAULT_PORT: u16 = 7415;
