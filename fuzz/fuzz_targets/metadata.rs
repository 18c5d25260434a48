#![no_main]
//! `regroup::fuzz_harness::metadata` (docs/fuzzing.md).

libfuzzer_sys::fuzz_target!(|data: &[u8]| regroup::fuzz_harness::metadata(data));
