//! Bytes read from a Redis connection: see `ordo_net::fuzzing::resp`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ordo_net::fuzzing::resp(data));
