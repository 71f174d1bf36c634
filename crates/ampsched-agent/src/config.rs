//! The agent's configuration file (TOML) and its validation.
//!
//! ```toml
//! period_ms = 30                 # control period (default 30)
//! fast = "0"                     # declare fast CPUs (else discovered classes)
//! capacity = { "0" = 1024, "1" = 512 }   # per-CPU capacity overrides
//! state = "/run/ampsched/state.json"
//! metrics = "127.0.0.1:9464"     # loopback only
//! log = "/var/log/ampsched/decisions.jsonl"
//! rescan_ms = 500                # how often new processes / VMs are looked for
//!
//! [placer]                       # or: placer = "aash"
//! name = "aash"                  # parameters as in `ampsched policies`
//!
//! [[target]]                     # exactly one of command / pid / qmp / qemu_pid / qemu
//! name = "batch"
//! command = ["make", "-j8"]      # launched by the agent; children managed too
//! weight = 256
//! priority = "normal"            # low | normal | high
//! fast_vcpus = [0]               # aware guest / aware program: its fast threads
//! ```
//!
//! Unknown fields are rejected; every error names the file, the line and
//! column (syntax) or the target and field (meaning), and what is allowed.

use crate::AgentError;
use ampsched_model::spec::{PolicySpec, PriorityClass};
use ampsched_model::CpuSet;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Default credit-style weight of a target.
pub const DEFAULT_WEIGHT: u32 = 256;

/// `placer = "name"` or a `[placer]` table with parameters.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum PlacerField {
    /// Just a name.
    Name(String),
    /// Name and parameters.
    Spec(PolicySpec),
}

/// One `[[target]]` as written.
#[derive(Clone, Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct TargetSpec {
    /// Label in logs and metrics.
    pub name: String,
    /// Launch this command (argv).
    pub command: Option<Vec<String>>,
    /// Manage this existing process.
    pub pid: Option<i32>,
    /// A QEMU VM reached through its QMP socket.
    pub qmp: Option<PathBuf>,
    /// A QEMU VM by process id (vCPUs from thread names).
    pub qemu_pid: Option<i32>,
    /// `"all"`: every QEMU process on the host, each its own domain.
    pub qemu: Option<String>,
    /// Also manage descendant processes (default: true for commands, false for pids).
    pub children: Option<bool>,
    /// Credit-style weight (default 256).
    pub weight: Option<u32>,
    /// Priority class (default normal).
    pub priority: Option<PriorityClass>,
    /// Aware guest: the vCPU (thread index) ids it considers fast.
    pub fast_vcpus: Option<Vec<u32>>,
}

/// The whole file as written.
#[derive(Clone, Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// Control period, ms.
    pub period_ms: Option<f64>,
    /// Placer and parameters.
    pub placer: Option<PlacerField>,
    /// Fast CPUs (Linux CPU list).
    pub fast: Option<String>,
    /// Capacity per Linux CPU number.
    pub capacity: Option<BTreeMap<String, f64>>,
    /// Run the calibration probe at start.
    pub calibrate: Option<bool>,
    /// State file for `restore`.
    pub state: Option<PathBuf>,
    /// Metrics endpoint (loopback address:port).
    pub metrics: Option<String>,
    /// Decision log (JSON lines), "-" = stdout.
    pub log: Option<PathBuf>,
    /// Perfetto trace file of the decisions.
    pub trace: Option<PathBuf>,
    /// How often to look for new processes and VMs, ms.
    pub rescan_ms: Option<f64>,
    /// Targets.
    #[serde(default, rename = "target")]
    pub targets: Vec<TargetSpec>,
}

/// What a target is.
#[derive(Clone, Debug, PartialEq)]
pub enum TargetKind {
    /// A command the agent launches.
    Command(Vec<String>),
    /// An existing process.
    Pid(i32),
    /// A QEMU VM through QMP.
    Qmp(PathBuf),
    /// A QEMU VM by pid, vCPUs from thread names.
    QemuPid(i32),
    /// Every QEMU process (thread names), discovered continuously.
    QemuAll,
}

/// A validated target.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    /// Label.
    pub name: String,
    /// Kind.
    pub kind: TargetKind,
    /// Manage descendants too.
    pub children: bool,
    /// Weight.
    pub weight: u32,
    /// Priority class.
    pub priority: PriorityClass,
    /// Fast vCPU ids (aware guest).
    pub fast_vcpus: Option<Vec<u32>>,
}

/// A validated configuration (command-line options may still override parts).
#[derive(Clone, Debug, Default)]
pub struct AgentConfig {
    /// Control period.
    pub period_ms: Option<f64>,
    /// Placer.
    pub placer: Option<PolicySpec>,
    /// Fast CPUs.
    pub fast: Option<CpuSet>,
    /// Capacities per Linux CPU.
    pub capacity: BTreeMap<u32, f64>,
    /// Calibrate at start.
    pub calibrate: bool,
    /// State file.
    pub state: Option<PathBuf>,
    /// Metrics address text.
    pub metrics: Option<String>,
    /// Decision log path.
    pub log: Option<PathBuf>,
    /// Perfetto trace path.
    pub trace: Option<PathBuf>,
    /// Rescan interval, ms.
    pub rescan_ms: Option<f64>,
    /// Targets.
    pub targets: Vec<Target>,
}

impl TargetSpec {
    /// Validate one target; `at` locates it in messages (e.g. `config.toml: target[2] "vm1"`).
    pub fn validate(&self, at: &str) -> Result<Target, AgentError> {
        let err = |field: &str, msg: String| AgentError::new(format!("{at}: {field}: {msg}"));
        if self.name.trim().is_empty() {
            return Err(err("name", "must not be empty".into()));
        }
        let mut kinds = Vec::new();
        if let Some(c) = &self.command {
            if c.is_empty() || c[0].is_empty() {
                return Err(err("command", "must name a program, e.g. [\"make\", \"-j8\"]".into()));
            }
            kinds.push(("command", TargetKind::Command(c.clone())));
        }
        if let Some(p) = self.pid {
            if p <= 0 {
                return Err(err("pid", format!("must be a positive process id, got {p}")));
            }
            kinds.push(("pid", TargetKind::Pid(p)));
        }
        if let Some(q) = &self.qmp {
            kinds.push(("qmp", TargetKind::Qmp(q.clone())));
        }
        if let Some(p) = self.qemu_pid {
            if p <= 0 {
                return Err(err("qemu_pid", format!("must be a positive process id, got {p}")));
            }
            kinds.push(("qemu_pid", TargetKind::QemuPid(p)));
        }
        if let Some(q) = &self.qemu {
            if q != "all" {
                return Err(err("qemu", format!("the only allowed value is \"all\", got \"{q}\"")));
            }
            kinds.push(("qemu", TargetKind::QemuAll));
        }
        if kinds.len() != 1 {
            let names: Vec<_> = kinds.iter().map(|k| k.0).collect();
            return Err(AgentError::new(format!(
                "{at}: give exactly one of command, pid, qmp, qemu_pid, qemu (got {})",
                if names.is_empty() { "none".to_string() } else { names.join(", ") }
            )));
        }
        let kind = kinds.remove(0).1;
        let weight = self.weight.unwrap_or(DEFAULT_WEIGHT);
        if !(1..=65535).contains(&weight) {
            return Err(err("weight", format!("must be in [1, 65535], got {weight}")));
        }
        if let Some(f) = &self.fast_vcpus {
            if f.is_empty() {
                return Err(err("fast_vcpus", "must list at least one vCPU id (omit it for a legacy guest)".into()));
            }
        }
        let children = self.children.unwrap_or(matches!(kind, TargetKind::Command(_)));
        Ok(Target {
            name: self.name.clone(),
            kind,
            children,
            weight,
            priority: self.priority.unwrap_or_default(),
            fast_vcpus: self.fast_vcpus.clone(),
        })
    }
}

/// Parse a configuration text; `file` names it in errors.
pub fn parse(text: &str, file: &str) -> Result<AgentConfig, AgentError> {
    let raw: ConfigFile = toml::from_str(text).map_err(|e| {
        let loc = e
            .span()
            .map(|s| {
                let line = text[..s.start.min(text.len())].matches('\n').count() + 1;
                let col = s.start - text[..s.start.min(text.len())].rfind('\n').map(|i| i + 1).unwrap_or(0) + 1;
                format!(":{line}:{col}")
            })
            .unwrap_or_default();
        AgentError::new(format!("{file}{loc}: {}", e.message()))
    })?;
    let mut cfg = AgentConfig {
        period_ms: raw.period_ms,
        placer: raw.placer.map(|p| match p {
            PlacerField::Name(n) => PolicySpec { name: n, params: Default::default() },
            PlacerField::Spec(s) => s,
        }),
        calibrate: raw.calibrate.unwrap_or(false),
        state: raw.state,
        metrics: raw.metrics,
        log: raw.log,
        trace: raw.trace,
        rescan_ms: raw.rescan_ms,
        ..Default::default()
    };
    if let Some(p) = cfg.period_ms {
        if !(1.0..=60_000.0).contains(&p) {
            return Err(AgentError::new(format!("{file}: period_ms: must be in [1, 60000], got {p}")));
        }
    }
    if let Some(p) = cfg.rescan_ms {
        if !(1.0..=600_000.0).contains(&p) {
            return Err(AgentError::new(format!("{file}: rescan_ms: must be in [1, 600000], got {p}")));
        }
    }
    if let Some(f) = &raw.fast {
        cfg.fast =
            Some(CpuSet::parse_list(f).map_err(|e| AgentError::new(format!("{file}: fast: {e} (e.g. \"0-3\")")))?);
    }
    for (k, v) in raw.capacity.unwrap_or_default() {
        let c: u32 =
            k.parse().map_err(|_| AgentError::new(format!("{file}: capacity: key `{k}` is not a CPU number")))?;
        if !(v > 0.0 && v.is_finite()) {
            return Err(AgentError::new(format!("{file}: capacity.{k}: must be a positive number, got {v}")));
        }
        cfg.capacity.insert(c, v);
    }
    if raw.targets.is_empty() {
        return Err(AgentError::new(format!(
            "{file}: no [[target]]: add at least one (command, pid, qmp, qemu_pid or qemu)"
        )));
    }
    for (i, t) in raw.targets.iter().enumerate() {
        let v = t.validate(&format!("{file}: target[{i}] \"{}\"", t.name))?;
        if cfg.targets.iter().any(|o| o.name == v.name) {
            return Err(AgentError::new(format!("{file}: target[{i}]: name \"{}\" is used twice", v.name)));
        }
        cfg.targets.push(v);
    }
    Ok(cfg)
}

/// Read and parse a configuration file.
pub fn load(path: &Path) -> Result<AgentConfig, AgentError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| AgentError::new(format!("{}: cannot read the configuration: {e}", path.display())))?;
    parse(&text, &path.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_file_parses() {
        let text = r#"
period_ms = 20
fast = "0"
capacity = { "0" = 1024, "1" = 512 }
metrics = "127.0.0.1:9464"

[placer]
name = "aash"
low_parallelism = false

[[target]]
name = "batch"
command = ["sleep", "1"]

[[target]]
name = "db"
pid = 1
priority = "high"
weight = 512

[[target]]
name = "vm1"
qmp = "/run/vm1.qmp"
fast_vcpus = [0, 1]

[[target]]
name = "vms"
qemu = "all"
"#;
        let c = parse(text, "a.toml").unwrap();
        assert_eq!(c.placer.as_ref().unwrap().name, "aash");
        assert_eq!(c.placer.as_ref().unwrap().params.len(), 1);
        assert_eq!(c.capacity.get(&1), Some(&512.0));
        assert_eq!(c.targets.len(), 4);
        // Commands manage their children by default, pids do not.
        assert!(c.targets[0].children && !c.targets[1].children);
        assert_eq!((c.targets[1].weight, c.targets[1].priority), (512, PriorityClass::High));
        assert_eq!(c.targets[2].kind, TargetKind::Qmp("/run/vm1.qmp".into()));
        assert_eq!(c.targets[3].kind, TargetKind::QemuAll);
        let c = parse("placer = \"fast-first\"\n[[target]]\nname = \"x\"\npid = 3\n", "b.toml").unwrap();
        assert_eq!(c.placer.unwrap().name, "fast-first");
    }

    #[test]
    fn the_shipped_example_is_valid() {
        let text = include_str!("../../../examples/agent/agent.toml");
        let c = parse(text, "examples/agent/agent.toml").unwrap();
        assert_eq!(c.targets.len(), 4);
        assert_eq!(c.fast.unwrap().to_list(), "0-3");
        assert_eq!(c.metrics.as_deref(), Some("127.0.0.1:9464"));
    }

    #[test]
    fn errors_name_the_place_and_what_is_allowed() {
        let e = parse("period_ms = 30\n[[target]]\nname = \"x\"\npdi = 4\n", "c.toml").unwrap_err().to_string();
        assert!(e.starts_with("c.toml:4:1: unknown field `pdi`"), "{e}");
        let e = parse("[[target]]\nname = \"x\"\npid = 4\ncommand = [\"ls\"]\n", "c.toml").unwrap_err().to_string();
        assert!(
            e.contains("target[0] \"x\": give exactly one of command, pid, qmp, qemu_pid, qemu (got command, pid)"),
            "{e}"
        );
        let e = parse("[[target]]\nname = \"x\"\nqemu = \"some\"\n", "c.toml").unwrap_err().to_string();
        assert!(e.contains("qemu: the only allowed value is \"all\""), "{e}");
        let e = parse("[[target]]\nname = \"x\"\npid = 4\nweight = 0\n", "c.toml").unwrap_err().to_string();
        assert!(e.contains("weight: must be in [1, 65535], got 0"), "{e}");
        let e = parse("fast = \"a\"\n[[target]]\nname = \"x\"\npid = 4\n", "c.toml").unwrap_err().to_string();
        assert!(e.contains("fast: `a` is not a CPU number"), "{e}");
        let e = parse("", "c.toml").unwrap_err().to_string();
        assert!(e.contains("no [[target]]"), "{e}");
        let e = parse("[[target]]\nname = \"x\"\npid = 4\n[[target]]\nname = \"x\"\npid = 5\n", "c.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("name \"x\" is used twice"), "{e}");
        let e = parse("period_ms = [", "c.toml").unwrap_err().to_string();
        assert!(e.starts_with("c.toml:1:"), "{e}");
    }
}
