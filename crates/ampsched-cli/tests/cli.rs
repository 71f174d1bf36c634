//! The `ampsched` binary end to end: outputs, exit codes and error messages.

use std::process::Command;

fn ampsched(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ampsched"))
        .args(args)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .output()
        .expect("run ampsched");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn quickstart_runs_and_writes_json_with_the_schema() {
    let dir = std::env::temp_dir().join(format!("ampsched-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("out.json");
    let (code, out, err) =
        ampsched(&["sim", "scenarios/examples/quickstart.toml", "--runs", "2", "--json", json.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("quickstart") && out.contains("completion_s"), "{out}");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["schema"], "ampsched.sim/1");
    let runs = v["runs"].as_array().unwrap();
    // Two runs, seeds 1 and 2 (the file's first seed is 1).
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0]["seed"], 1);
    assert_eq!(runs[1]["seed"], 2);
    assert!(runs[0]["domains"][0]["series"].as_array().unwrap().len() >= 4);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bad_inputs_exit_non_zero_with_a_located_message() {
    let dir = std::env::temp_dir().join(format!("ampsched-cli-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "[machine]\ncpus = [{ class = \"slow\" }]\n[[domain]]\nname = \"a\"\nvcpus = 1\nworkload = { model = \"nope\" }\n").unwrap();
    let (code, _, err) = ampsched(&["sim", bad.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("bad.toml:6:") && err.contains("unknown model `nope`"), "{err}");

    let (code, _, err) = ampsched(&["sim", "scenarios/examples/quickstart.toml", "--dispatcher", "cfs9"]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown dispatcher `cfs9`") && err.contains("credit"), "{err}");

    let (code, _, err) = ampsched(&["sim", "does/not/exist.toml"]);
    assert_eq!(code, 2);
    assert!(err.contains("does/not/exist.toml") && err.contains("cannot read"), "{err}");

    let (code, _, err) = ampsched(&["bench", "--case", "XXL"]);
    assert_eq!(code, 2);
    assert!(err.contains("known: S, M, L, XL"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn policies_and_models_are_listed_with_parameters() {
    let (code, out, _) = ampsched(&["policies"]);
    assert_eq!(code, 0);
    assert!(out.contains("dispatcher credit") && out.contains("tslice_ms") && out.contains("placer none"), "{out}");
    let (code, out, _) = ampsched(&["models"]);
    assert_eq!(code, 0);
    for name in ["mcf", "blackscholes", "BLAST", "FFT-W", "npb-bt", "phased", "pipeline"] {
        assert!(out.contains(name), "models output lacks {name}");
    }
}

#[test]
fn the_demo_compares_the_baseline_with_aash_on_the_same_seeds() {
    let (code, demo, err) = ampsched(&["demo"]);
    assert_eq!(code, 0, "{err}");
    let (_, sim, _) = ampsched(&["sim", "scenarios/examples/quickstart.toml", "--compare", "aash"]);
    assert_eq!(demo, sim, "demo = sim quickstart --compare aash");
    assert!(demo.contains("placer none") && demo.contains("placer aash"), "{demo}");
    // The three seeds give the same figures, so each is printed once, without a spread.
    let row = demo.lines().find(|l| l.starts_with("fast idle while slow busy s")).expect("fast-idle row");
    let v: Vec<f64> = row.split_whitespace().filter_map(|w| w.parse().ok()).collect();
    assert_eq!(v.len(), 2, "{row}");
    assert!(v[1] < v[0], "aash wastes less fast-CPU time: {row}");
    assert!(demo.contains("\nLook at: ") && demo.contains("\nThen: with aash, "), "{demo}");
    // Several runs print one table of means, --per-run one per seed.
    let (_, means, _) = ampsched(&["sim", "scenarios/examples/quickstart.toml"]);
    assert_eq!(means.matches("completion_s").count(), 1, "{means}");
    assert!(means.contains("3 seeds 1-3"), "{means}");
    let (_, per, _) = ampsched(&["sim", "scenarios/examples/quickstart.toml", "--per-run"]);
    assert_eq!(per.matches("completion_s").count(), 3, "{per}");
}

#[test]
fn the_readme_quick_start_shows_what_the_demo_prints() {
    // The README's first screen quotes `ampsched demo` (indented four spaces, from its title
    // line to the "Then:" line); a model change that moves a figure must update it.
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let start = readme.find("    quickstart — dispatcher credit").expect("README quotes the demo's title line");
    let then = start + readme[start..].find("\n    Then: with aash").expect("README quotes the demo's Then line");
    let end = then + 1 + readme[then + 1..].find('\n').unwrap_or(readme.len() - then - 1);
    let quoted: String =
        readme[start..end].lines().map(|l| format!("{}\n", l.strip_prefix("    ").unwrap_or(l))).collect();
    let (code, demo, err) = ampsched(&["demo"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        quoted.trim_end(),
        demo.trim_end(),
        "README.md's quick-start block differs from `ampsched demo`: paste the demo's output"
    );
}

#[test]
fn values_and_outputs_are_checked_before_a_run() {
    let q = "scenarios/examples/quickstart.toml";
    for (flag, v, msg) in [("--seed", "-1", "must be ≥ 0, got -1"), ("--jobs", "-2", "must be ≥ 0, got -2")] {
        let (code, _, err) = ampsched(&["sim", q, flag, v]);
        assert_eq!(code, 2);
        assert!(err.contains(msg), "{err}");
    }
    let (code, _, err) = ampsched(&["sim", q, "--runs", "0"]);
    assert_eq!(code, 2);
    assert!(err.contains("must be ≥ 1, got 0"), "{err}");
    let (code, out, err) = ampsched(&["sim", q, "--json", "/nonexistent-dir/out.json"]);
    assert_eq!(code, 2);
    assert!(err.contains("/nonexistent-dir/out.json: cannot write the JSON results"), "{err}");
    assert!(out.is_empty(), "nothing ran: {out}");
    let (code, _, err) = ampsched(&["sim", q, "--runs", "2", "--trace", "/nonexistent-dir/t"]);
    assert_eq!(code, 2);
    assert!(err.contains("/nonexistent-dir/t.seed1: cannot write the trace"), "{err}");
    let (code, _, err) = ampsched(&["sim", q, "--compare", "nope"]);
    assert_eq!(code, 2);
    assert!(err.contains("--compare: unknown placer `nope`"), "{err}");
    let (_, help, _) = ampsched(&["sim", "--help"]);
    assert!(help.contains("Examples:") && help.contains("seed+runs−1"), "{help}");
}

#[test]
fn reproduce_checks_its_output_directory_before_anything_runs() {
    let dir = std::env::temp_dir().join(format!("ampsched-cli-out-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("a-file");
    std::fs::write(&file, "not a directory").unwrap();
    // `--only nomatch` would fail when the experiments load; the output check comes
    // first, so the message is about --out: nothing was loaded, let alone run.
    for (out, expect) in [
        (
            file.clone(),
            format!("{}: cannot write the report directory: it exists and is not a directory", file.display()),
        ),
        (file.join("sub"), format!("{}: cannot write the report directory:", file.join("sub").display())),
    ] {
        let (code, stdout, err) = ampsched(&["reproduce", "aash", "--out", out.to_str().unwrap(), "--only", "nomatch"]);
        assert_eq!(code, 2, "{err}");
        assert!(err.contains(&expect), "expected `{expect}` in: {err}");
        assert!(!err.contains("nomatch") && stdout.is_empty(), "{stdout}{err}");
    }
    // A writable --out passes the check and the next error is the real one.
    let ok = dir.join("new/report");
    let (code, _, err) = ampsched(&["reproduce", "aash", "--out", ok.to_str().unwrap(), "--only", "nomatch"]);
    assert_eq!(code, 2);
    assert!(err.contains("--only [\"nomatch\"] matches no experiment"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn every_subcommand_help_shows_examples_of_itself() {
    let cmds = [
        "demo",
        "sim",
        "reproduce",
        "policies",
        "models",
        "bench",
        "topology",
        "run",
        "agent",
        "restore",
        "validate",
        "xen-lab",
    ];
    for c in cmds {
        let (code, help, err) = ampsched(&[c, "--help"]);
        assert_eq!(code, 0, "{c}: {err}");
        let ex = help.split("Examples:").nth(1).unwrap_or_else(|| panic!("`ampsched {c} --help` has no examples"));
        assert!(ex.contains(&format!("ampsched {c}")), "{c}: examples do not run it:\n{ex}");
    }
    // The top-level list names every subcommand this test knows, and no other.
    let (_, help, _) = ampsched(&["--help"]);
    let listed: Vec<&str> = help
        .split("Commands:")
        .nth(1)
        .unwrap()
        .lines()
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| *w != "help")
        .collect();
    assert_eq!(listed, cmds, "{help}");
}

#[test]
fn sim_prints_rt_app_slack_and_deadline_misses_of_periodic_threads() {
    let (code, out, err) = ampsched(&["sim", "scenarios/rtapp/periodic.toml", "--runs", "1"]);
    assert_eq!(code, 0, "{err}");
    let table = out.split("periodic thread").nth(1).unwrap_or_else(|| panic!("no periodic section:\n{out}"));
    let threads: Vec<&str> = table.lines().skip(1).filter_map(|l| l.split_whitespace().next()).collect();
    // render and the two decode instances reach timers; hog does not.
    assert_eq!(threads, ["render", "decode-0", "decode-1"], "{out}");
    // render: a 16.667 ms timer over 5 s, first period from t = 0: 5000 / 16.667 = 300 periods.
    assert!(table.lines().nth(1).unwrap().split_whitespace().nth(1) == Some("300"), "{out}");
    let (_, out, _) = ampsched(&["sim", "scenarios/examples/quickstart.toml", "--runs", "1"]);
    assert!(!out.contains("periodic thread"), "no timers, no section:\n{out}");
}

#[test]
fn admission_refuses_a_large_run_with_exit_2_naming_the_estimate() {
    // Issue 18's case, accepted silently before: 1024 CPUs, 10 000 vCPUs, 1e6 s.
    let dir = std::env::temp_dir().join(format!("ampsched-cli-admission-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut s = String::from(
        "stop = { duration_s = 1e6 }\n[machine]\ncpus = [{ class = \"fast\", count = 256 }, { class = \"slow\", count = 768 }]\n",
    );
    for i in 0..10 {
        s.push_str(&format!("[[domain]]\nname = \"vm{i}\"\nvcpus = 1000\nworkload = {{ model = \"cpu-bound\" }}\n"));
    }
    let f = dir.join("huge.toml");
    std::fs::write(&f, s).unwrap();
    let json = dir.join("out.json");
    let (code, out, err) = ampsched(&["sim", f.to_str().unwrap(), "--json", json.to_str().unwrap()]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains(f.to_str().unwrap()) && err.contains("run too large"), "{err}");
    assert!(err.contains("events > the limit of 2e9") && err.contains("1024 CPUs, 10000 tasks"), "{err}");
    assert!(err.contains("--allow-large"), "{err}");
    assert!(!json.exists(), "refused before any output is created");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn json_streamed_to_a_file_is_byte_identical_to_stdout() {
    let dir = std::env::temp_dir().join(format!("ampsched-cli-stream-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("out.json");
    let args = ["sim", "scenarios/examples/quickstart.toml", "--runs", "2", "--quiet", "--json"];
    let (code, _, err) = ampsched(&[&args[..], &[json.to_str().unwrap()]].concat());
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = ampsched(&[&args[..], &["-"]].concat());
    assert_eq!(code, 0, "{err}");
    let file = std::fs::read_to_string(&json).unwrap();
    assert!(file.ends_with("}\n") && file.len() > 1000);
    assert_eq!(file, out);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn an_io_backend_that_is_not_a_background_domain_exits_non_zero() {
    let dir = std::env::temp_dir().join(format!("ampsched-cli-io-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("io.toml");
    let text = "[machine]\ncpus = [{ class = \"slow\", count = 2 }]\n\
                io_backend = { domain = \"vm\", request_us = 15, response_us = 15 }\n\
                [[domain]]\nname = \"dom0\"\nvcpus = 1\nbackground = true\nworkload = { program = [] }\n\
                [[domain]]\nname = \"vm\"\nvcpus = 1\nworkload = { program = [{ io = { ms = 1 } }] }\n";
    std::fs::write(&bad, text).unwrap();
    let (code, _, err) = ampsched(&["sim", bad.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(
        err.contains("io.toml:3:")
            && err.contains("machine.io_backend.domain")
            && err.contains("(the scenario's: dom0)"),
        "{err}"
    );
    // Named right, the same file runs.
    std::fs::write(&bad, text.replace("domain = \"vm\", request_us", "domain = \"dom0\", request_us")).unwrap();
    let (code, _, err) = ampsched(&["sim", bad.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    std::fs::remove_dir_all(&dir).ok();
}
