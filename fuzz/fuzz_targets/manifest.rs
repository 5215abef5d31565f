#![no_main]
// All invariants live in quietkv::fuzzing, shared with the stable replay test.
libfuzzer_sys::fuzz_target!(|data: &[u8]| quietkv::fuzzing::manifest(data));
