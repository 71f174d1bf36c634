//! Built-in workloads of `ampsched validate`: the programs of the
//! `ampsched-workload` binary (crates/ampsched-agent/src/bin/ampsched-workload.rs),
//! named `builtin:NAME[:key=value,…]`, each with the simulator program that
//! does the same thing.
//!
//! | name | real command | simulated program (per thread j of T) |
//! |---|---|---|
//! | `barrier-block` | `barrier --wait block` | `phases` × [work; barrier, blocking] |
//! | `barrier-spin` | `barrier --wait spin` | `phases` × [work; barrier, spinning] |
//! | `phased` | `phased --wait block` | for phase k: [work if k mod T = j; barrier, blocking] |
//! | `phased-spin` | `phased --wait spin` | same, spinning |
//! | `spin` | `spin --units` | one piece of work of `phases` × `phase_ms` |
//!
//! Keys: `threads` (default 2), `phases` (12), `phase_ms` (36: work per
//! thread and phase, as measured on this machine) — issue 14's program is
//! `builtin:phased`'s cousin `builtin:barrier-block` with these defaults.
//!
//! Why a barrier stands for `phased`'s hand-over: there phase k runs on
//! thread k mod T while the others wait for "current phase = their next
//! one" (a condition variable with `notify_all`, or a spin on an atomic);
//! the end of phase k starts phase k + 1 at once. With every thread meeting
//! at a barrier after each phase, the waiting threads are already there, so
//! the barrier opens when the working thread arrives: the same hand-over,
//! and the same wake-ups (`notify_all` wakes every waiter, which checks and
//! sleeps again; the barrier wakes them all too).
//!
//! Work: `ampsched-workload` counts work in units (a fixed chain of 2 000
//! integer operations). validate measures the CPU time of one unit on this
//! machine (a one-thread `spin --units` probe, from the sched trace) and
//! sizes each phase in whole units: `phase_units = round(phase_ms / unit)`,
//! and the simulator gets exactly `phase_units × unit` of work per phase on
//! CPUs of speed 1.0, so a phase takes as long in both bodies.
//!
//! May import: the model and `std`. Must never import the parent module.

use std::fmt::Write as _;

/// The built-in programs and what they are.
pub const BUILTINS: &[(&str, &str)] = &[
    ("barrier-block", "SPMD phases: every thread works, then all meet at a blocking barrier"),
    ("barrier-spin", "SPMD phases: every thread works, then all meet at a spinning barrier"),
    ("phased", "sequential phases: phase k on thread k mod T while the others block"),
    ("phased-spin", "sequential phases: phase k on thread k mod T while the others spin"),
    ("spin", "CPU-bound threads: phases × phase_ms of work each"),
];

/// The keys a built-in accepts.
pub const KEYS: &str = "threads (1-64, default 2), phases (1-10000, default 12), phase_ms (0.1-10000, default 36)";

/// The program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `barrier --wait block|spin`.
    Barrier {
        /// Spinning barrier.
        spin: bool,
    },
    /// `phased --wait block|spin`.
    Phased {
        /// Spinning wait.
        spin: bool,
    },
    /// `spin --units`.
    Spin,
}

/// A built-in workload with its parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct Builtin {
    /// Its name (a key of [`BUILTINS`]).
    pub name: String,
    /// The program.
    pub kind: Kind,
    /// Threads.
    pub threads: u32,
    /// Phases.
    pub phases: u32,
    /// Work per thread and phase, ms (as measured on the machine).
    pub phase_ms: f64,
}

impl Builtin {
    /// Parse `builtin:NAME[:key=value,…]`; the error names the part at fault and what is allowed.
    pub fn parse(s: &str) -> Result<Builtin, String> {
        let rest = s.strip_prefix("builtin:").ok_or_else(|| format!("`{s}`: a built-in starts with `builtin:`"))?;
        let (name, args) = match rest.split_once(':') {
            Some((n, a)) => (n, a),
            None => (rest, ""),
        };
        let known = || BUILTINS.iter().map(|b| b.0).collect::<Vec<_>>().join(", ");
        let kind = match name {
            "barrier-block" => Kind::Barrier { spin: false },
            "barrier-spin" => Kind::Barrier { spin: true },
            "phased" => Kind::Phased { spin: false },
            "phased-spin" => Kind::Phased { spin: true },
            "spin" => Kind::Spin,
            _ => return Err(format!("`{s}`: unknown built-in `{name}`; known: {}", known())),
        };
        let mut b = Builtin { name: name.to_string(), kind, threads: 2, phases: 12, phase_ms: 36.0 };
        for kv in args.split(',').map(str::trim).filter(|x| !x.is_empty()) {
            let bad = |why: &str| format!("`{s}`: `{kv}`: {why}; keys: {KEYS}");
            let (k, v) = kv.split_once('=').ok_or_else(|| bad("expected key=value"))?;
            match k.trim() {
                "threads" => match v.trim().parse::<u32>() {
                    Ok(x) if (1..=64).contains(&x) => b.threads = x,
                    _ => return Err(bad("threads must be an integer in 1-64")),
                },
                "phases" => match v.trim().parse::<u32>() {
                    Ok(x) if (1..=10_000).contains(&x) => b.phases = x,
                    _ => return Err(bad("phases must be an integer in 1-10000")),
                },
                "phase_ms" => match v.trim().parse::<f64>() {
                    Ok(x) if (0.1..=10_000.0).contains(&x) => b.phase_ms = x,
                    _ => return Err(bad("phase_ms must be a number in 0.1-10000")),
                },
                _ => return Err(bad("unknown key")),
            }
        }
        Ok(b)
    }

    /// The canonical label, e.g. `builtin:barrier-block:threads=2,phases=12,phase_ms=36`.
    pub fn label(&self) -> String {
        format!("builtin:{}:threads={},phases={},phase_ms={}", self.name, self.threads, self.phases, self.phase_ms)
    }

    /// Whole work units per phase for a unit of `unit_ns`.
    pub fn phase_units(&self, unit_ns: f64) -> u64 {
        ((self.phase_ms * 1e6 / unit_ns.max(1e-3)).round() as u64).max(1)
    }

    /// `ampsched-workload`'s arguments.
    pub fn args(&self, units: u64) -> Vec<String> {
        let wait = |spin: bool| if spin { "spin" } else { "block" }.to_string();
        let t = self.threads.to_string();
        let p = self.phases.to_string();
        let u = units.to_string();
        match self.kind {
            Kind::Barrier { spin } => {
                ["barrier", "--threads", &t, "--phases", &p, "--phase-units", &u, "--wait", &wait(spin)]
                    .map(String::from)
                    .to_vec()
            }
            Kind::Phased { spin } => {
                ["phased", "--threads", &t, "--phases", &p, "--phase-units", &u, "--wait", &wait(spin)]
                    .map(String::from)
                    .to_vec()
            }
            Kind::Spin => {
                let total = (units * self.phases as u64).to_string();
                ["spin", "--threads", &t, "--units", &total].map(String::from).to_vec()
            }
        }
    }

    /// The threads' names: the program's command name as the kernel keeps it
    /// (`comm`, the binary's file name cut to 15 bytes; its threads are not
    /// renamed), numbered `comm-k` in thread-id order as rt-app instances are.
    pub fn names(&self, comm: &str) -> Vec<String> {
        (0..self.threads).map(|j| format!("{comm}-{j}")).collect()
    }

    /// The simulated programs as a TOML `tasks = [...]` value: `phase_ns` of
    /// work (speed 1.0) per phase.
    pub fn sim_tasks(&self, phase_ns: u64) -> String {
        let ms = phase_ns as f64 / 1e6;
        let work = |m: f64| format!("{{ compute = {{ ms = {m:?} }} }}");
        let bar =
            |spin: bool| format!("{{ barrier = {{ id = 0, wait = \"{}\" }} }}", if spin { "spin" } else { "block" });
        let mut out = String::from("[");
        for j in 0..self.threads {
            let ops: Vec<String> = match self.kind {
                Kind::Barrier { spin } => {
                    vec![format!("{{ loop = {{ count = {}, body = [{}, {}] }} }}", self.phases, work(ms), bar(spin))]
                }
                Kind::Phased { spin } => (0..self.phases)
                    .flat_map(|k| {
                        let mine = k % self.threads == j;
                        mine.then(|| work(ms)).into_iter().chain(std::iter::once(bar(spin)))
                    })
                    .collect(),
                Kind::Spin => vec![work(ms * self.phases as f64)],
            };
            let _ = write!(out, "{}{{ program = [{}] }}", if j > 0 { ", " } else { "" }, ops.join(", "));
        }
        out.push(']');
        out
    }
}

/// The kernel's `comm` of a program started from `bin`: its file name cut to 15 bytes (`TASK_COMM_LEN` − 1).
pub fn comm_of(bin: &str) -> String {
    let base = bin.rsplit('/').next().unwrap_or(bin);
    let mut end = base.len().min(15);
    while !base.is_char_boundary(end) {
        end -= 1;
    }
    base[..end].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_keys_and_refuses_with_what_is_allowed() {
        let b = Builtin::parse("builtin:barrier-block").unwrap();
        assert_eq!((b.kind, b.threads, b.phases, b.phase_ms), (Kind::Barrier { spin: false }, 2, 12, 36.0));
        let b = Builtin::parse("builtin:phased-spin:threads=3, phases=6,phase_ms=10").unwrap();
        assert_eq!((b.kind, b.threads, b.phases, b.phase_ms), (Kind::Phased { spin: true }, 3, 6, 10.0));
        assert_eq!(b.label(), "builtin:phased-spin:threads=3,phases=6,phase_ms=10");
        let e = Builtin::parse("builtin:nope").unwrap_err();
        assert!(e.contains("unknown built-in `nope`") && e.contains("barrier-block, barrier-spin"), "{e}");
        let e = Builtin::parse("builtin:spin:threads=0").unwrap_err();
        assert!(e.contains("`threads=0`") && e.contains("1-64"), "{e}");
        let e = Builtin::parse("builtin:spin:cpus=2").unwrap_err();
        assert!(e.contains("unknown key") && e.contains("phase_ms"), "{e}");
    }

    #[test]
    fn the_real_command_and_the_simulated_program_do_the_same_work() {
        // A unit of 3 µs: 36 ms is 12 000 units; the simulator gets 12 000 × 3 µs = 36 ms a phase.
        let b = Builtin::parse("builtin:barrier-spin:threads=2,phases=4").unwrap();
        let u = b.phase_units(3000.0);
        assert_eq!(u, 12_000);
        assert_eq!(b.args(u).join(" "), "barrier --threads 2 --phases 4 --phase-units 12000 --wait spin");
        let t = b.sim_tasks(u * 3000);
        assert_eq!(
            t,
            "[{ program = [{ loop = { count = 4, body = [{ compute = { ms = 36.0 } }, { barrier = { id = 0, wait = \"spin\" } }] } }] }, \
             { program = [{ loop = { count = 4, body = [{ compute = { ms = 36.0 } }, { barrier = { id = 0, wait = \"spin\" } }] } }] }]"
        );
        // phased, 2 threads, 3 phases: thread 0 works in phases 0 and 2, thread 1 in phase 1;
        // every thread passes the barrier after each phase (3 arrivals each).
        let p = Builtin::parse("builtin:phased:phases=3").unwrap();
        let t = p.sim_tasks(1_000_000);
        let w = "{ compute = { ms = 1.0 } }";
        let bar = "{ barrier = { id = 0, wait = \"block\" } }";
        assert_eq!(
            t,
            format!("[{{ program = [{w}, {bar}, {bar}, {w}, {bar}] }}, {{ program = [{bar}, {w}, {bar}, {bar}] }}]")
        );
        // spin: one piece of phases × phase work; the real side gets the total in units.
        let s = Builtin::parse("builtin:spin:threads=1,phases=10,phase_ms=30").unwrap();
        assert_eq!(s.args(100).join(" "), "spin --threads 1 --units 1000");
        assert_eq!(s.sim_tasks(30_000_000), "[{ program = [{ compute = { ms = 300.0 } }] }]");
        assert_eq!(s.names("ampsched-worklo"), vec!["ampsched-worklo-0"]);
    }

    #[test]
    fn comm_is_the_file_name_cut_to_15_bytes() {
        assert_eq!(comm_of("/usr/bin/ampsched-workload"), "ampsched-worklo");
        assert_eq!(comm_of("rt-app"), "rt-app");
    }
}
