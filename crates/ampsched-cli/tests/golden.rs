//! Golden outputs (issue 13, D6): `ampsched sim FILE --json -` of three small
//! scenarios, checked in under `tests/golden/` and compared byte for byte.
//! The engine's books are integers and its one transcendental function is
//! `libm`'s portable `log`, so these bytes must be the same on every machine.
//!
//! After an intended change of the simulator's output, regenerate them with
//! `AMPSCHED_BLESS=1 cargo test -p ampsched-cli --test golden` and say in the
//! commit which numbers changed and why.

use std::path::Path;
use std::process::Command;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

fn check(scenario: &str, golden: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_ampsched"))
        .args(["sim", scenario, "--json", "-", "--quiet"])
        .current_dir(ROOT)
        .output()
        .expect("run ampsched");
    assert!(out.status.success(), "{scenario}: {}", String::from_utf8_lossy(&out.stderr));
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(golden);
    if std::env::var_os("AMPSCHED_BLESS").is_some() {
        std::fs::write(&path, &out.stdout).expect("write golden file");
        return;
    }
    let want = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    if out.stdout != want {
        let got = String::from_utf8_lossy(&out.stdout);
        let want = String::from_utf8_lossy(&want);
        let line = got
            .lines()
            .zip(want.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(got.lines().count().min(want.lines().count()));
        panic!(
            "{scenario}: output differs from {} at line {}:\n  got:  {}\n  want: {}",
            path.display(),
            line + 1,
            got.lines().nth(line).unwrap_or("<end>"),
            want.lines().nth(line).unwrap_or("<end>")
        );
    }
}

#[test]
fn quickstart_json_is_byte_identical_to_the_golden_file() {
    check("scenarios/examples/quickstart.toml", "quickstart.json");
}

#[test]
fn rtapp_producer_consumer_json_is_byte_identical_to_the_golden_file() {
    check("scenarios/rtapp/prodcons.toml", "prodcons.json");
}

#[test]
fn noisy_server_json_is_byte_identical_to_the_golden_file() {
    check("crates/ampsched-cli/tests/golden/noisy-server.toml", "noisy-server.json");
}
