#![no_main]
//! `regroup::fuzz_harness::url` (docs/fuzzing.md).

libfuzzer_sys::fuzz_target!(|data: &[u8]| regroup::fuzz_harness::url(data));
