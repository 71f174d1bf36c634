//! The event loop's clock: a queue of timed events in a total order, and the
//! FIFO of effects due at the current instant.
//!
//! Design: one binary heap of events ordered by (time, sequence number), so
//! simultaneous events run in the order they were scheduled. Time is integer
//! nanoseconds. Stale events (a compute segment preempted, a slice ended
//! early) are not removed: they carry a generation the engine checks.
//!
//! May import: `ampsched-model` ids and `Nanos`. Must never import the rest
//! of the engine: every other room schedules events through this one.

use ampsched_model::{CpuId, Nanos, TaskId};
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// An event kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ev {
    /// The dispatcher's periodic tick on a CPU.
    Tick(CpuId),
    /// The dispatcher's periodic accounting.
    Account,
    /// A CPU's time slice may have ended (a lazy timer: see `Sim::set_slice`).
    SliceEnd(CpuId),
    /// A task's compute, spin limit or busy time ends (stale unless the generation matches).
    OpDone(TaskId, u32),
    /// A sleeping task wakes (stale unless the sleep generation matches).
    Wake(TaskId, u32),
    /// A CPU's bursty noise switches on or off.
    Noise(CpuId),
    /// The placer's period.
    Place,
    /// A time-series sample.
    Stats,
    /// A timed domain change (index into the configured changes).
    Domain(usize),
    /// Sample the trace's counter tracks (traced runs only; not counted in `events`).
    TraceSample,
    /// The stop condition's time bound.
    End,
}

struct Item {
    t: Nanos,
    seq: u64,
    ev: Ev,
}

impl PartialEq for Item {
    fn eq(&self, o: &Self) -> bool {
        self.t == o.t && self.seq == o.seq
    }
}
impl Eq for Item {}
impl PartialOrd for Item {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Item {
    fn cmp(&self, o: &Self) -> Ordering {
        // BinaryHeap is a max-heap: invert for earliest-first.
        o.t.cmp(&self.t).then(o.seq.cmp(&self.seq))
    }
}

/// Timed events, earliest first; among equal times, first scheduled first.
#[derive(Default)]
pub(crate) struct EventQueue {
    heap: BinaryHeap<Item>,
    seq: u64,
}

impl EventQueue {
    /// Schedule `ev` at `t`.
    #[inline]
    pub(crate) fn push(&mut self, t: Nanos, ev: Ev) {
        self.seq += 1;
        self.heap.push(Item { t, seq: self.seq, ev });
    }

    /// The next event and its time.
    #[inline]
    pub(crate) fn pop(&mut self) -> Option<(Nanos, Ev)> {
        self.heap.pop().map(|i| (i.t, i.ev))
    }
}

/// An effect due at the current instant, run after the event that caused it.
pub(crate) enum Pending {
    /// The dispatcher asked this CPU to reschedule.
    Resched(CpuId),
    /// A running task was released by a sync object: interpret its next op.
    Continue(TaskId),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earliest_first_and_equal_times_in_scheduling_order() {
        let mut q = EventQueue::default();
        q.push(Nanos(20), Ev::Place);
        q.push(Nanos(10), Ev::Stats);
        q.push(Nanos(20), Ev::Account);
        q.push(Nanos(10), Ev::End);
        q.push(Nanos(5), Ev::Tick(CpuId(1)));
        let order: Vec<(u64, Ev)> = std::iter::from_fn(|| q.pop()).map(|(t, e)| (t.0, e)).collect();
        // 5 first; the two at 10 in push order (Stats then End); the two at 20 likewise.
        assert_eq!(
            order,
            vec![(5, Ev::Tick(CpuId(1))), (10, Ev::Stats), (10, Ev::End), (20, Ev::Place), (20, Ev::Account)]
        );
    }
}
