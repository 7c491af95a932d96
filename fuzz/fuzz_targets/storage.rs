//! A durable file read back at restart: see `ordo_net::fuzzing::storage`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ordo_net::fuzzing::storage(data));
