//! A git index file written by a command (`gitstage::index_is_ordinary`, TRUST-1).
//!
//! Any bytes, as they are and behind a `DIRC` version-2 header: never a panic, never an
//! allocation beyond the input's size, and the same answer twice.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let first = gitstage::index_is_ordinary(data);
    assert_eq!(first, gitstage::index_is_ordinary(data));
    let mut framed = b"DIRC\0\0\0\x02".to_vec();
    framed.extend_from_slice(data);
    let _ = gitstage::index_is_ordinary(&framed);
});
