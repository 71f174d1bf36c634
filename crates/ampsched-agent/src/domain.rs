//! A managed domain (a process tree or a VM's vCPU threads) as the agent
//! keeps it: identity, launched child, masks and per-domain counters. A leaf
//! module shared by inventory (which fills it) and export (which reports it).

use ampsched_model::{CpuSet, DomainId};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::{Child, ExitStatus};

/// What a domain is: a process tree, or a VM's vCPU threads.
pub(crate) enum DomKind {
    Proc { procs: BTreeSet<i32> },
    Vm { pid: i32, qmp: Option<PathBuf>, vcpus: BTreeMap<i32, u32> },
}

/// A managed process or VM.
pub struct Domain {
    pub(crate) id: DomainId,
    pub(crate) target: usize,
    pub(crate) name: String,
    pub(crate) root: i32,
    pub(crate) kind: DomKind,
    pub(crate) child: Option<Child>,
    /// The launched command's pidfd (readable once it exits; `None` on kernels before 5.3).
    pub(crate) pidfd: Option<std::os::fd::OwnedFd>,
    pub(crate) exit: Option<ExitStatus>,
    /// Its exit status was read without reaping it (`signals::exit_status`): a zombie to reap
    /// a period later (`Inventory::reap_zombies`).
    pub(crate) zombie: bool,
    pub(crate) base_mask: CpuSet,
    pub(crate) applied: Vec<CpuSet>,
    pub(crate) next_vcpu: u32,
    pub(crate) alive: bool,
    pub(crate) fast_ns: u64,
    pub(crate) fisb_ns: u64,
    pub(crate) changes: u64,
    pub(crate) active: usize,
    pub(crate) threads: usize,
    /// Left to the kernel in the period now starting (`ampsched_policy::gate::backoff`).
    pub(crate) hands_off: bool,
    /// Backed off: its placement measured worse than the kernel's alone.
    pub(crate) backed_off: bool,
    /// Times it backed off.
    pub(crate) backoffs: u64,
    /// Median progress managed ÷ hands-off, once measured.
    pub(crate) progress_ratio: Option<f64>,
}

impl Domain {
    /// A launched command that ended: its exit status, read without reaping it (the zombie is
    /// reaped a period later: `crate::signals` module doc). Reads only once its pidfd (when
    /// there is one) is readable.
    pub(crate) fn peek_exit(&mut self) {
        let (Some(c), None) = (self.child.as_ref(), self.exit) else { return };
        if self.pidfd.as_ref().is_some_and(|f| !crate::signals::readable(f)) {
            return;
        }
        if let Ok(Some(s)) = crate::signals::exit_status(c.id() as i32) {
            self.exit = Some(s);
            self.zombie = true;
        }
    }
}
