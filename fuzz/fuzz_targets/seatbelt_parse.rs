//! SBPL profile text (`seatbelt::Profile::parse`).
//!
//! SBPL text → `seatbelt::Profile::parse`: never a panic, and a profile that parses renders to
//! text that parses back to the same tree, and renders to the same text again (the renderer is
//! a fixed point of the parser).
#![no_main]

use libfuzzer_sys::fuzz_target;
use seatbelt::Profile;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(profile) = Profile::parse(text) else {
        return;
    };
    let rendered = profile.render();
    let again = match Profile::parse(&rendered) {
        Ok(p) => p,
        Err(e) => panic!("the rendering of a parsed profile does not parse: {e}\n{rendered}"),
    };
    assert_eq!(
        again, profile,
        "render then parse changed the tree:\n{rendered}"
    );
    assert_eq!(again.render(), rendered, "rendering is not stable");
});
