//! Sync objects of a task group: barriers, locks, channels (bounded queues),
//! condition variables, parallel-loop work pools and periodic timers.
//!
//! An object is keyed by its kind, its group and its id; it is created on
//! first use. The interpreter (`engine::interp`) changes them and releases
//! the tasks they hand over to.
//!
//! May import: the model's ids. Must never import the interpreter, the event
//! loop or the bridges.

use ampsched_model::{Nanos, TaskId};
use std::collections::VecDeque;

/// Which object: kind, group, id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum SyncKey {
    Barrier(u32, u32),
    Lock(u32, u32),
    Chan(u32, u32),
    ParFor(u32, u32),
    Cond(u32, u32),
    Timer(u32, u32),
}

/// The state of one object (each kind uses some of the fields).
#[derive(Default)]
pub(super) struct SyncObj {
    pub(super) arrived: u32,
    pub(super) owner: Option<TaskId>,
    pub(super) waiters: VecDeque<TaskId>,
    pub(super) push_waiters: VecDeque<TaskId>,
    pub(super) count: u64,
    pub(super) remaining: u64,
    pub(super) init: bool,
    pub(super) exited: u32,
    /// Next expiry of a timer.
    pub(super) at: Nanos,
}
