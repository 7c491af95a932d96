//! Every protocol of ordo, one folder each, and the registry that names them.
//!
//! Drivers (the simulator, the real runtime, the benchmarks, the CLI) reach a protocol only
//! through [`with_protocol`]: they implement [`ProtocolVisitor`] once, generically, and the
//! registry instantiates it for the protocol named. Adding a protocol means adding its folder
//! and one line to [`registry!`]'s invocation below.
#![deny(missing_docs)]

pub mod backoff;
pub mod canary;
pub mod chora;
pub mod client_pipeline;
pub mod client_table;
pub mod curp;
pub mod executor;
pub mod mencius;
pub mod multipaxos;
pub mod n2paxos;
pub mod nezha;
pub mod nopaxos;
pub mod slot_window;
pub mod swiftpaxos;
pub mod tempo;
pub mod testkit;
pub mod unreplicated;

use ordo_core::Protocol;

/// Code that is generic over the protocol, run for one protocol chosen by name.
pub trait ProtocolVisitor {
    /// What the visit returns.
    type Output;
    /// Runs for protocol `P`.
    fn visit<P: Protocol>(self) -> Self::Output;
}

/// The largest view, ballot, slot, timestamp or request number a node accepts from a peer
/// (issue 20). Each grows by one (or by the replica count) per view change, recovery, command
/// or request, so no cluster reaches it; below it, `+ 1` (or `+ n`) on a number that came from
/// a peer cannot overflow. A message carrying more is a counted drop. Each protocol says why
/// its numbers stay below it next to its check.
pub const NUMBER_MAX: u64 = u64::MAX / 4;

/// A registered protocol, as `ordo protocols` lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProtocolInfo {
    /// Registry name.
    pub name: &'static str,
    /// One line.
    pub summary: &'static str,
    /// True for deliberately broken variants (negative controls for the fuzz harness).
    pub canary: bool,
    /// [`Protocol::has_fast_path`].
    pub fast_path: bool,
    /// [`Protocol::replicas_max`].
    pub replicas_max: Option<usize>,
    /// [`Protocol::state_on_disk`]: the cluster survives stopping every process at once, with the
    /// protocol's default options ([`Protocol::state_on_disk_with`] says it for others).
    pub state_on_disk: bool,
}

/// The registered protocol called `name`, if any.
pub fn protocol_info(name: &str) -> Option<ProtocolInfo> {
    protocols().into_iter().find(|info| info.name == name)
}

/// No protocol of that name is registered.
#[derive(Debug, PartialEq, Eq)]
pub struct UnknownProtocol(pub String);

impl std::fmt::Display for UnknownProtocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let known: Vec<&str> = protocols().iter().map(|p| p.name).collect();
        write!(f, "unknown protocol `{}` (known: {})", self.0, known.join(", "))
    }
}

impl std::error::Error for UnknownProtocol {}

macro_rules! registry {
    ($($(#[$attr:meta])* $protocol:ty => canary: $canary:expr),* $(,)?) => {
        /// Every registered protocol, in listing order.
        // One push per entry, because entries may carry `#[cfg]` attributes a `vec![]` cannot.
        #[allow(clippy::vec_init_then_push)]
        pub fn protocols() -> Vec<ProtocolInfo> {
            let mut all = Vec::new();
            $($(#[$attr])* all.push(ProtocolInfo {
                name: <$protocol as Protocol>::NAME,
                summary: <$protocol as Protocol>::SUMMARY,
                canary: $canary,
                fast_path: <$protocol as Protocol>::has_fast_path(),
                replicas_max: <$protocol as Protocol>::replicas_max(),
                state_on_disk: <$protocol as Protocol>::state_on_disk(),
            });)*
            all
        }

        /// Runs `visitor` for the protocol called `name`.
        pub fn with_protocol<V: ProtocolVisitor>(name: &str, visitor: V) -> Result<V::Output, UnknownProtocol> {
            $($(#[$attr])* if name == <$protocol as Protocol>::NAME {
                return Ok(visitor.visit::<$protocol>());
            })*
            Err(UnknownProtocol(name.to_string()))
        }
    };
}

registry! {
    unreplicated::Unreplicated => canary: false,
    multipaxos::MultiPaxos => canary: false,
    nezha::Nezha => canary: false,
    tempo::Tempo => canary: false,
    nopaxos::NoPaxos => canary: false,
    chora::Chora => canary: false,
    mencius::Mencius => canary: false,
    swiftpaxos::SwiftPaxos => canary: false,
    n2paxos::N2Paxos => canary: false,
    curp::Curp => canary: false,
    #[cfg(feature = "canary")]
    multipaxos::MultiPaxosEarlyReply => canary: true,
    #[cfg(feature = "canary")]
    multipaxos::MultiPaxosLossyViewChange => canary: true,
    #[cfg(feature = "canary")]
    multipaxos::MultiPaxosReusedOp => canary: true,
    #[cfg(feature = "canary")]
    multipaxos::MultiPaxosReexecutedRetry => canary: true,
    #[cfg(feature = "canary")]
    nezha::NezhaMajorityFastQuorum => canary: true,
    #[cfg(feature = "canary")]
    tempo::TempoMinorityStability => canary: true,
    #[cfg(feature = "canary")]
    tempo::TempoEarlyForget => canary: true,
    #[cfg(feature = "canary")]
    nopaxos::NoPaxosRequestOverNoOp => canary: true,
    #[cfg(feature = "canary")]
    chora::ChoraCommitBelowQuorum => canary: true,
    #[cfg(feature = "canary")]
    mencius::MenciusAckAnyChosen => canary: true,
    #[cfg(feature = "canary")]
    mencius::MenciusRestartFresh => canary: true,
    #[cfg(feature = "canary")]
    swiftpaxos::SwiftPaxosSingleVote => canary: true,
    #[cfg(feature = "canary")]
    swiftpaxos::SwiftPaxosStaleRead => canary: true,
    #[cfg(feature = "canary")]
    n2paxos::N2PaxosOwnOrder => canary: true,
    #[cfg(feature = "canary")]
    curp::CurpBlindWitness => canary: true,
}
