//! A history file given to `ordo check`: see `ordo_check::fuzzing::history`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ordo_check::fuzzing::history(data));
