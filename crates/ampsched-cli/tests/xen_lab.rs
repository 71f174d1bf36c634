//! `ampsched xen-lab` on lab scenarios the lab cannot run (issue 17, "Bad
//! input"): each fails before anything boots, with exit code 2 and a message
//! naming the file, the field, the value and what is allowed. These run
//! `scripts/xen-lab/lab.py` for real (python3 ≥ 3.11) but never QEMU: the
//! checks come first.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// A fresh directory under the target dir for this test's files.
fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("xen-lab").join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch dir");
    d
}

fn xen_lab(args: &[&str], path: Option<&Path>) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ampsched"));
    c.arg("xen-lab").args(args).current_dir(ROOT);
    if let Some(p) = path {
        c.env("PATH", p);
    }
    c.output().expect("run ampsched")
}

/// Run `check` on a scenario text; expect exit 2 and every `want` in stderr.
fn rejected(name: &str, scenario: &str, want: &[&str]) {
    let f = scratch(name).join(format!("{name}.toml"));
    std::fs::write(&f, scenario).expect("write scenario");
    let out = xen_lab(&["check", f.to_str().expect("utf-8 path")], None);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{name}: exit {:?}, stderr: {err}", out.status.code());
    assert!(out.stdout.is_empty(), "{name}: printed a dom0 script for a bad scenario");
    for w in want {
        assert!(err.contains(w), "{name}: stderr lacks {w:?}: {err}");
    }
}

#[test]
fn more_vcpus_than_the_pools_pcpus_is_refused_naming_the_field() {
    rejected(
        "too-many-vcpus",
        "pcpus = 2\nfast = 1\nsched = \"aash\"\n[[domain]]\nname = \"vm1\"\nvcpus = 3\nworkload = [\"spin\", \"--units\", \"10\"]\n",
        &["too-many-vcpus.toml", "domain[0].vcpus = 3", "an integer 1..pcpus (2)"],
    );
    // More pool pCPUs than the lab emulates (7 + dom0's).
    rejected(
        "too-many-pcpus",
        "pcpus = 9\n[[domain]]\nname = \"vm1\"\nworkload = [\"spin\", \"--units\", \"10\"]\n",
        &["pcpus = 9", "an integer 1..7"],
    );
}

#[test]
fn start_placement_repeat_and_rseq_are_checked_before_booting() {
    // `start` names one pool pCPU per vCPU, like `pin`, and not both at once.
    rejected(
        "start-out-of-pool",
        "pcpus = 2\nfast = 0\n[[domain]]\nname = \"vm1\"\nstart = [2]\nworkload = [\"spin\", \"--units\", \"10\"]\n",
        &["domain[0].start = [2]", "one pool pCPU (0..1) per vCPU (1)"],
    );
    rejected(
        "start-and-pin",
        "pcpus = 2\nfast = 0\n[[domain]]\nname = \"vm1\"\nstart = [0]\npin = [1]\nworkload = [\"spin\", \"--units\", \"10\"]\n",
        &["domain[0].start = [0]", "either pin", "not both"],
    );
    // The stress test's run time fits in the scenario's timeout.
    rejected(
        "repeat-past-timeout",
        "timeout_s = 100\n[[domain]]\nname = \"vm1\"\nrepeat_s = 200\nworkload = [\"spin\", \"--units\", \"10\"]\n",
        &["domain[0].repeat_s = 200", "0..timeout_s (100)"],
    );
    rejected(
        "rseq-not-bool",
        "rseq = \"yes\"\n[[domain]]\nname = \"vm1\"\nworkload = [\"spin\", \"--units\", \"10\"]\n",
        &["rseq = 'yes'", "true | false"],
    );
    // One TCG thread for every pCPU cannot make some pCPUs slower than others.
    rejected(
        "tcg-unknown",
        "tcg = \"parallel\"\n[[domain]]\nname = \"vm1\"\nworkload = [\"spin\", \"--units\", \"10\"]\n",
        &["tcg = 'parallel'", "one of multi, single"],
    );
    rejected(
        "tcg-single-asymmetric",
        "tcg = \"single\"\npcpus = 2\nfast = 1\n[[domain]]\nname = \"vm1\"\nworkload = [\"spin\", \"--units\", \"10\"]\n",
        &["tcg = 'single'", "fast = 0 or slow = \"none\""],
    );
    rejected(
        "guest-hvm",
        "guest = \"hvm\"\n[[domain]]\nname = \"vm1\"\nworkload = [\"spin\", \"--units\", \"10\"]\n",
        &["guest = 'hvm'", "one of pv, pvh"],
    );
}

#[test]
fn unknown_scheduler_options_are_refused_with_the_allowed_values() {
    rejected(
        "unknown-sched",
        "sched = \"sedf\"\n[[domain]]\nname = \"vm1\"\nworkload = [\"spin\", \"--units\", \"10\"]\n",
        &["sched = 'sedf'", "one of credit, aash"],
    );
    rejected(
        "unknown-cosched",
        "cosched = \"gang\"\n[[domain]]\nname = \"vm1\"\nworkload = [\"spin\", \"--units\", \"10\"]\n",
        &["cosched = 'gang'", "one of none, cs, cds, pcs, bcs"],
    );
    rejected(
        "unknown-key",
        "shed = \"aash\"\n[[domain]]\nname = \"vm1\"\nworkload = [\"spin\", \"--units\", \"10\"]\n",
        &["shed = 'aash'", "unknown key"],
    );
    // A CON domain is a co-scheduling notion: refused without a co-scheduler.
    rejected(
        "con-without-cosched",
        "[[domain]]\nname = \"lu\"\nvcpus = 2\ntype = \"con\"\nworkload = [\"spin\", \"--units\", \"10\"]\n",
        &["domain[0].type = 'con'", "needs cosched"],
    );
}

#[test]
fn a_run_without_the_host_packages_names_them_before_booting() {
    // PATH holding only python3: a valid scenario gets as far as the host check.
    let dir = scratch("no-packages");
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).expect("bin dir");
    // The interpreter itself (PATH's python3 may be a shim that needs the rest of PATH).
    let py = Command::new("python3").args(["-c", "import sys; print(sys.executable)"]).output().expect("python3");
    let py = String::from_utf8_lossy(&py.stdout).trim().to_string();
    assert!(!py.is_empty(), "python3 not on PATH");
    std::os::unix::fs::symlink(&py, bin.join("python3")).expect("symlink python3");
    let out = xen_lab(
        &["run", "scripts/xen-lab/scenarios/smoke.toml", "--out", dir.join("out").to_str().expect("utf-8")],
        Some(&bin),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {err}");
    assert!(err.contains("missing host packages: qemu-system-x86"), "stderr: {err}");
    assert!(err.contains("apt-get install"), "stderr: {err}");
    assert!(!dir.join("out/run0").exists(), "a run directory was made before the host check");
}

#[test]
fn a_lab_directory_without_the_driver_is_a_clear_error() {
    let dir = scratch("no-lab");
    let out = xen_lab(&["--lab", dir.to_str().expect("utf-8"), "check", "x.toml"], None);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {err}");
    assert!(err.contains("not the Xen lab (no lab.py there)"), "stderr: {err}");
}

#[test]
fn the_shipped_scenarios_pass_the_checks() {
    for s in ["smoke", "aash-fair", "aash-aware", "credit-weights", "lu-solo-con", "lu-solo-idle"] {
        let f = format!("scripts/xen-lab/scenarios/{s}.toml");
        let out = xen_lab(&["check", &f], None);
        assert!(out.status.success(), "{f}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(String::from_utf8_lossy(&out.stdout).contains("xl create"), "{f}: no dom0 script printed");
    }
}

#[test]
fn compare_passes_min_burst_ms_to_the_lab_and_refuses_a_negative_one() {
    // A stand-in lab whose driver prints the arguments it was given.
    let dir = scratch("min-burst");
    std::fs::write(dir.join("lab.py"), "import sys\nprint(' '.join(sys.argv[1:]))\n").expect("write lab.py");
    let lab = dir.to_str().expect("utf-8");
    let out = xen_lab(&["--lab", lab, "compare", "--reuse", "--min-burst-ms", "0"], None);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    assert!(said.contains("compare --seeds 3 --min-burst-ms 0 --reuse"), "lab.py was given: {said}");
    // Omitted: lab.py's own default applies (nothing passed).
    let out = xen_lab(&["--lab", lab, "compare", "--reuse"], None);
    assert!(!String::from_utf8_lossy(&out.stdout).contains("--min-burst-ms"));
    // Negative or not a number: exit 2 naming the value and what is allowed, before the lab runs.
    for bad in ["-1", "soon"] {
        let out = xen_lab(&["--lab", lab, "compare", &format!("--min-burst-ms={bad}")], None);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad}: stderr: {err}");
        assert!(err.contains(bad) && err.contains("at least 0"), "{bad}: stderr: {err}");
        assert!(out.stdout.is_empty(), "{bad}: the lab ran");
    }
}
