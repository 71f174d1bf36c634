//! The rt-app JSON importer on a 4-CPU machine (1 fast, 3 slow): any input ends
//! in programs or a located error, never a crash (run with -max_len=1048576).
#![no_main]

use ampsched_model::{rtapp, Topology};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let topo = Topology::fast_slow(1, 2.0, 3, 1.0, 4);
        let _ = rtapp::compile(text, "fuzz.json", &topo);
    }
});
