//! Sync objects of a task group: barriers, locks, channels (bounded queues),
//! condition variables, parallel-loop work pools and periodic timers.
//!
//! An object is named by its kind, its group and its id. When a run is
//! built, every op of every task's program that uses an object is resolved
//! to the object's dense index (`resolve`), so the interpreter finds it in a
//! `Vec` instead of looking a key up on every arrival; tasks of one group
//! running one program share one table. The interpreter (`engine::interp`)
//! changes the objects and releases the tasks they hand over to.
//!
//! May import: the model's ids and ops. Must never import the interpreter,
//! the event loop or the bridges.

use ampsched_model::{Nanos, Op, TaskId};
use std::collections::{BTreeMap, VecDeque};

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

/// No object (an op that uses none).
pub(super) const NONE: u32 = u32::MAX;

/// The objects an op uses: a parallel loop's work pool and its implicit barrier.
pub(super) fn keys_of(op: &Op, group: u32) -> [Option<SyncKey>; 2] {
    match *op {
        Op::Barrier { id, .. } | Op::BarrierN { id, .. } => [Some(SyncKey::Barrier(group, id)), None],
        Op::Lock { id, .. } | Op::Unlock { id } => [Some(SyncKey::Lock(group, id)), None],
        Op::Push { chan, .. } | Op::Pop { chan, .. } => [Some(SyncKey::Chan(group, chan)), None],
        Op::CondWait { id, .. } | Op::CondSignal { id, .. } => [Some(SyncKey::Cond(group, id)), None],
        Op::Timer { id, .. } => [Some(SyncKey::Timer(group, id)), None],
        Op::ParFor { id, .. } => [Some(SyncKey::ParFor(group, id)), Some(SyncKey::Barrier(group, id | 0x8000_0000))],
        _ => [None, None],
    }
}

/// Per op of `ops` run by sync group `group`, the dense indices of the objects
/// it uses (`NONE` where none), numbering new objects in `index` as met.
pub(super) fn resolve(ops: &[Op], group: u32, index: &mut BTreeMap<SyncKey, u32>) -> Vec<[u32; 2]> {
    ops.iter()
        .map(|op| {
            keys_of(op, group).map(|k| match k {
                Some(k) => {
                    let n = index.len() as u32;
                    *index.entry(k).or_insert(n)
                }
                None => NONE,
            })
        })
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;
    use ampsched_model::Wait;

    #[test]
    fn ops_of_one_group_share_objects_and_other_groups_get_their_own() {
        let ops = [
            Op::Lock { id: 1, wait: Wait::Block },
            Op::Barrier { id: 0, wait: Wait::Block },
            Op::Unlock { id: 1 },
            Op::Sleep { dur: Nanos(5) },
            Op::End,
        ];
        let mut index = BTreeMap::new();
        let g0 = resolve(&ops, 0, &mut index);
        // Lock 1 is object 0 for both its lock and unlock; barrier 0 is object 1.
        assert_eq!(g0, vec![[0, NONE], [1, NONE], [0, NONE], [NONE, NONE], [NONE, NONE]]);
        // Group 1 running the same program: two new objects (2, 3), same shape.
        let g1 = resolve(&ops, 1, &mut index);
        assert_eq!(g1, vec![[2, NONE], [3, NONE], [2, NONE], [NONE, NONE], [NONE, NONE]]);
        assert_eq!(index.len(), 4);
    }
}
