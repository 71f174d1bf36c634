//! The agent's configuration file parser (and each target's validation).
#![no_main]

use ampsched_agent::config;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = config::parse(text, "fuzz.toml");
    }
});
