//! A peer's message (or a durable record) of a registered protocol: the first byte picks the
//! protocol, the rest goes to `ordo_net::fuzzing::message`.
#![no_main]

use ordo_protocols::{ProtocolVisitor, protocols, with_protocol};

struct Message<'a>(&'a [u8]);

impl ProtocolVisitor for Message<'_> {
    type Output = ();
    fn visit<P: ordo_core::Protocol>(self) {
        ordo_net::fuzzing::message::<P>(self.0);
    }
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some((&pick, bytes)) = data.split_first() else { return };
    static NAMES: std::sync::OnceLock<Vec<&str>> = std::sync::OnceLock::new();
    let names = NAMES.get_or_init(|| protocols().iter().filter(|p| !p.canary).map(|p| p.name).collect());
    with_protocol(names[usize::from(pick) % names.len()], Message(bytes)).expect("a registered protocol");
});
