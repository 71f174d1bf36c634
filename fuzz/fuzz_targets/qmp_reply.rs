//! The QMP reply parser: each line as a QMP message, and any `return` value as
//! a `query-cpus-fast` answer.
#![no_main]

use ampsched_agent::qmp::{parse_cpus_fast, parse_message};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for line in text.split('\n') {
        if let Ok(v) = parse_message(line) {
            if let Some(r) = v.get("return") {
                let _ = parse_cpus_fast(r);
            }
            let _ = parse_cpus_fast(&v);
        }
    }
});
