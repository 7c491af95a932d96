//! A datagram body behind a valid header and MAC: see `ordo_net::fuzzing::wire_sealed`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ordo_net::fuzzing::wire_sealed(data));
