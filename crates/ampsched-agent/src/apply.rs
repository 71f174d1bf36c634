//! Apply: put the decided masks in force with `sched_setaffinity` (through an
//! [`Actuator`], so tests use a fake) and keep what is needed to undo them.
//!
//! Each change is an effective mask already (decision ∩ the thread's own
//! mask, see `ampsched_policy::placer_bridge`); it is converted to Linux CPU
//! numbers and set. Restore bookkeeping: before the first change to a thread
//! the state file records every managed thread's original affinity (one write
//! covers a batch of new threads); a changed thread is marked `touched`. On
//! exit ([`Applier::restore_all`]: normal, signal, target exit, or a panic
//! unwinding through the loop) every touched thread gets its original back
//! and the state file is removed — kept only when a restore failed, for
//! `ampsched restore`.
//!
//! Failures are values: ESRCH (the thread vanished) drops the thread from
//! management; EPERM/EINVAL are counted and the mask is taken as applied, so
//! the same change is not retried every period.

use crate::actuate::{ActError, Actuator};
use crate::discovery::Discovered;
use crate::export::Export;
use crate::inventory::Inventory;
use crate::loopstats::LoopStats;
use crate::observe::class_of_mask;
use crate::state::{self, StateEntry, StateFile, STATE_SCHEMA};
use crate::trace::boottime_ns;
use crate::AgentError;
use ampsched_model::{CpuSet, TaskId};
use ampsched_policy::AffinityChange;
use serde_json::json;
use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;

/// Sets affinities and remembers how to undo them.
pub struct Applier {
    pub(crate) act: Box<dyn Actuator>,
    dry: bool,
    state_path: PathBuf,
    state_entries: Vec<StateEntry>,
    state_written: bool,
    restored: bool,
    /// Failed changes by reason (`esrch`, `eperm`, …).
    pub errors_by_kind: BTreeMap<&'static str, u64>,
}

impl Applier {
    /// An applier through `act`; a dry run (`act.dry_run()`) writes no state file.
    pub fn new(act: Box<dyn Actuator>, state_path: PathBuf) -> Applier {
        Applier {
            dry: act.dry_run(),
            act,
            state_path,
            state_entries: Vec::new(),
            state_written: false,
            restored: false,
            errors_by_kind: BTreeMap::new(),
        }
    }

    /// The actuator (for reading affinities).
    pub fn actuator(&self) -> &dyn Actuator {
        self.act.as_ref()
    }

    /// The actuator, for a change outside the managed threads (a fresh task's own mask given
    /// back: `crate::forks::free_forked`).
    pub fn actuator_mut(&mut self) -> &mut dyn Actuator {
        self.act.as_mut()
    }

    fn write_state(&mut self, inv: &mut Inventory) -> Result<(), AgentError> {
        let live: HashSet<i32> = inv.threads.values().map(|t| t.tid).collect();
        self.state_entries.retain(|e| live.contains(&e.tid));
        // Every managed thread is recorded (not only the changed ones), so that one write
        // covers a whole batch of new threads; restoring an unchanged thread is a no-op.
        for t in inv.threads.values_mut() {
            if !t.in_state {
                t.in_state = true;
                self.state_entries.push(StateEntry {
                    tid: t.tid,
                    pid: t.pid,
                    target: inv.domains[t.dom].name.clone(),
                    starttime: t.starttime,
                    original: t.original,
                });
            }
        }
        let s = StateFile {
            schema: STATE_SCHEMA.into(),
            agent_pid: std::process::id() as i32,
            entries: self.state_entries.clone(),
        };
        state::write_atomic(&self.state_path, &s)?;
        self.state_written = true;
        Ok(())
    }

    /// Apply effective masks (topology ids) to the inventory's threads.
    pub fn apply(
        &mut self,
        changes: &[AffinityChange],
        inv: &mut Inventory,
        d: &Discovered,
        ex: &mut Export,
        stats: &mut LoopStats,
    ) -> Result<(), AgentError> {
        let mut todo: Vec<(TaskId, CpuSet, CpuSet)> = Vec::new();
        for ch in changes {
            let Some(t) = inv.threads.get(&ch.task) else { continue };
            if ch.mask == t.cur {
                continue;
            }
            let lin = d.to_linux(&ch.mask);
            if lin.is_empty() {
                // Only when the thread's own mask has no CPU the agent manages.
                ex.warn_once(
                    format!("outside:{}", t.tid),
                    format!(
                        "thread {}: its own affinity {} has no managed CPU: left alone",
                        t.tid,
                        t.original.to_list()
                    ),
                );
                continue;
            }
            todo.push((ch.task, ch.mask, lin));
        }
        if !self.dry {
            // The state file holds every thread about to be changed before the first change.
            let need = todo.iter().any(|(task, _, _)| inv.threads.get(task).is_some_and(|t| !t.in_state))
                || inv.threads.values().any(|t| t.touched && !t.in_state);
            if need {
                self.write_state(inv)?;
            }
        }
        let mut vanished = Vec::new();
        for (task, mask, lin) in todo {
            let Some(t) = inv.threads.get(&task) else { continue };
            let (tid, di) = (t.tid, t.dom);
            // A move between classes: from a mask inside one class to one inside another (a
            // rotation's swap, a reaction's move): the thread migrates and loses its caches.
            let flip = class_of_mask(&d.topo, &t.cur).zip(class_of_mask(&d.topo, &mask)).is_some_and(|(a, b)| a != b);
            let result = match self.act.set(tid, &lin) {
                Ok(()) => {
                    stats.changes += 1;
                    stats.class_flips += u64::from(flip);
                    let dom = &mut inv.domains[di];
                    dom.changes += 1;
                    if !dom.applied.contains(&lin) {
                        dom.applied.push(lin);
                    }
                    if let Some(t) = inv.threads.get_mut(&task) {
                        t.cur = mask;
                        // Restored on exit (a denied change changed nothing and is not).
                        t.touched |= !self.dry;
                    }
                    if let Some(tr) = ex.trace.as_mut() {
                        let topo = &d.topo;
                        let fast = mask.iter().filter(|c| topo.is_fast(*c)).count() as f64 / mask.len().max(1) as f64;
                        tr.affinity(boottime_ns(), tid, fast);
                    }
                    if self.dry {
                        "dry-run"
                    } else {
                        "ok"
                    }
                }
                Err(e) => {
                    stats.errors += 1;
                    *self.errors_by_kind.entry(e.label()).or_insert(0) += 1;
                    if e == ActError::Vanished {
                        vanished.push(task);
                    } else if let Some(t) = inv.threads.get_mut(&task) {
                        // Denied: skip, and do not ask again every period.
                        t.cur = mask;
                    }
                    e.label()
                }
            };
            if ex.logging() {
                let ev = json!({"event": "change", "target": inv.domains[di].name, "tid": tid, "task": task.0,
                                "mask": mask.to_list(), "linux_mask": lin.to_list(), "result": result});
                ex.log(ev);
            }
        }
        for t in vanished {
            inv.remove_thread(ex, t, "vanished (ESRCH)");
        }
        Ok(())
    }

    /// Put back every affinity the agent changed; remove the state file. Returns failures.
    /// Runs once; later calls do nothing.
    pub fn restore_all(&mut self, inv: &Inventory, ex: &mut Export) -> usize {
        if self.restored {
            return 0;
        }
        self.restored = true;
        let mut failed = 0;
        if !self.dry {
            for (task, t) in inv.threads.iter().filter(|(_, t)| t.touched) {
                let result = match self.act.set(t.tid, &t.original) {
                    Ok(()) | Err(ActError::Vanished) => "ok",
                    Err(e) => {
                        failed += 1;
                        eprintln!("ampsched: cannot restore thread {} to {}: {e}", t.tid, t.original.to_list());
                        e.label()
                    }
                };
                ex.log(json!({"event": "restore", "tid": t.tid, "task": task.0, "mask": t.original.to_list(),
                              "result": result}));
            }
            if self.state_written && failed == 0 {
                let _ = std::fs::remove_file(&self.state_path);
            }
        }
        failed
    }
}
