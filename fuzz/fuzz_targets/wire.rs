//! A datagram as received, tag and all: see `ordo_net::fuzzing::wire`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ordo_net::fuzzing::wire(data));
