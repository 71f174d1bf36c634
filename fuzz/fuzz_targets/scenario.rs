//! The scenario parser (TOML → checked scenario, models instantiated from the
//! built-in library): any input ends in `Ok` or a located error, never a crash.
#![no_main]

use ampsched_sim::library::Library;
use ampsched_sim::scenario::Scenario;
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

static LIB: OnceLock<Library> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let lib = LIB.get_or_init(Library::builtin);
        let _ = Scenario::parse(text, "fuzz.toml", "fuzz", lib);
    }
});
