//! A cluster file given to `ordo node`: parsed (`ordo_net::fuzzing::cluster_file`), then placed
//! with the protocol it names (`ordo_net::fuzzing::cluster_placement`).
#![no_main]

use ordo_net::{ClusterFile, fuzzing};
use ordo_protocols::{ProtocolVisitor, with_protocol};

struct Placement<'a>(&'a ClusterFile);

impl ProtocolVisitor for Placement<'_> {
    type Output = ();
    fn visit<P: ordo_core::Protocol>(self) {
        fuzzing::cluster_placement::<P>(self.0);
    }
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Some(file) = fuzzing::cluster_file(data) {
        let _ = with_protocol(&file.protocol, Placement(&file));
    }
});
