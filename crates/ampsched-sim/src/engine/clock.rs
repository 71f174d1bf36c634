//! The event loop's clock: a queue of timed events in a total order, and the
//! FIFO of effects due at the current instant.
//!
//! Design: a 4-ary min-heap of 16-byte keys, earliest first (a 4-ary heap
//! is half as deep as a binary one, and its four children share a cache
//! line; `ampsched bench` measures it, the bare loop of `--bound` uses `std`'s
//! binary heap), beside two FIFO *lanes* for the periodic timers. A key is the
//! event's time (integer ns, the high 64 bits) and a tag (the low 64 bits):
//! a sequence number (`SEQ_BITS`), then the event's kind and id. Sequence
//! numbers grow with every event planned, so simultaneous events run in the
//! order they were scheduled (a total order), and comparing two keys as one
//! `u128` is that order; the event itself is decoded from the tag, so an
//! entry carries no payload.
//!
//! Lanes (issue 19 D2): a tick is always planned for the first tick-grid
//! point after now, and a slice end mostly for now plus the (fixed)
//! timeslice, so their keys come in increasing order: each kind gets a FIFO
//! that takes a key greater than its last one (an append, no sifting), and
//! the heap takes the few that are not (a slice shortened by ratelimit, a
//! deferred slice end). `pop` takes the least of the heap's top and the two
//! lanes' fronts, so the order of events is exactly the heap-only order:
//! the same keys are stored, only where differs. In `ampsched bench` L and
//! XL, ticks and slice ends are a third of all events; the heap they leave is a
//! third smaller, and pushing or popping them costs a comparison.
//!
//! The queue knows the run's horizon, the key of its `End` event: an event
//! keyed after it can never run, so it is not stored (a completion planned an
//! hour ahead in a 60 s run costs nothing). Stale events (a compute segment
//! preempted) are handled by the engine (`Sim::plan_op`): each task keeps
//! one plan and the queue holds at most the entries it needs to reach it.
//!
//! May import: `ampsched-model` ids and `Nanos`. Must never import the rest
//! of the engine: every other room schedules events through this one.

use ampsched_model::{CpuId, Nanos, TaskId};
use std::collections::VecDeque;

/// An event kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ev {
    /// The dispatcher's periodic tick on a CPU.
    Tick(CpuId),
    /// The dispatcher's periodic accounting.
    Account,
    /// A CPU's time slice may have ended (a lazy timer: see `Sim::set_slice`).
    SliceEnd(CpuId),
    /// A task's compute, spin limit or busy time ends (stale unless its key is the task's plan).
    OpDone(TaskId),
    /// A sleeping task wakes (stale unless its key is the task's last sleep).
    Wake(TaskId),
    /// A CPU's bursty noise switches on or off.
    Noise(CpuId),
    /// The placer's period.
    Place,
    /// A time-series sample.
    Stats,
    /// A timed domain change (index into the configured changes).
    Domain(u32),
    /// Sample the trace's counter tracks (traced runs only; not counted in `events`).
    TraceSample,
    /// The stop condition's time bound.
    End,
    /// The agent body's reaction to a fast CPU going idle is due (`place.rs`).
    React(CpuId),
}

/// Bits of an id in a tag: CPUs, tasks and domain changes are fewer than this.
pub(crate) const ID_BITS: u32 = 22;
/// Bits of the kind in a tag.
const KIND_BITS: u32 = 4;
/// Bits of the sequence number in a tag (2^38 ≈ 2.7·10^11 events planned per run).
const SEQ_BITS: u32 = 64 - ID_BITS - KIND_BITS;
const ID_MASK: u64 = (1 << ID_BITS) - 1;

impl Ev {
    /// Kind and id, packed.
    #[inline]
    fn code(self) -> u64 {
        let (k, id) = match self {
            Ev::Tick(c) => (0, c.0),
            Ev::Account => (1, 0),
            Ev::SliceEnd(c) => (2, c.0),
            Ev::OpDone(t) => (3, t.0),
            Ev::Wake(t) => (4, t.0),
            Ev::Noise(c) => (5, c.0),
            Ev::Place => (6, 0),
            Ev::Stats => (7, 0),
            Ev::Domain(i) => (8, i),
            Ev::TraceSample => (9, 0),
            Ev::End => (10, 0),
            Ev::React(c) => (11, c.0),
        };
        debug_assert!(u64::from(id) <= ID_MASK, "id {id} does not fit an event tag");
        (k << ID_BITS) | u64::from(id)
    }

    /// The event a tag's kind and id stand for.
    #[inline]
    fn decode(tag: u64) -> Ev {
        let id = (tag & ID_MASK) as u32;
        match (tag >> ID_BITS) & ((1 << KIND_BITS) - 1) {
            0 => Ev::Tick(CpuId(id)),
            1 => Ev::Account,
            2 => Ev::SliceEnd(CpuId(id)),
            3 => Ev::OpDone(TaskId(id)),
            4 => Ev::Wake(TaskId(id)),
            5 => Ev::Noise(CpuId(id)),
            6 => Ev::Place,
            7 => Ev::Stats,
            8 => Ev::Domain(id),
            9 => Ev::TraceSample,
            11 => Ev::React(CpuId(id)),
            _ => Ev::End,
        }
    }
}

/// An event's place in the total order: time, then sequence number (then kind and id).
pub(crate) type Key = u128;

/// The time of a key.
#[inline]
pub(crate) fn key_time(k: Key) -> Nanos {
    Nanos((k >> 64) as u64)
}

/// Timed events, earliest first; among equal times, first scheduled first.
pub(crate) struct EventQueue {
    heap: QuadHeap,
    /// Ticks (`LANE_TICK`) and slice ends (`LANE_SLICE`) whose keys came in increasing order.
    lanes: [VecDeque<Key>; 2],
    seq: u64,
    /// Events keyed after this never run and are not stored.
    horizon: Key,
    /// The most entries held at once.
    pub(crate) peak: usize,
}

impl Default for EventQueue {
    fn default() -> Self {
        EventQueue { heap: QuadHeap::default(), lanes: Default::default(), seq: 0, horizon: Key::MAX, peak: 0 }
    }
}

impl EventQueue {
    /// The key of `ev` at `t`, next in scheduling order (not stored).
    #[inline]
    pub(crate) fn key(&mut self, t: Nanos, ev: Ev) -> Key {
        self.seq += 1;
        assert!(self.seq < 1 << SEQ_BITS, "more than 2^{SEQ_BITS} events planned in one run");
        (u128::from(t.0) << 64) | u128::from((self.seq << (ID_BITS + KIND_BITS)) | ev.code())
    }

    /// Store an event under `key` (from `key`) in the heap; false if it is past the horizon.
    #[inline]
    pub(crate) fn insert(&mut self, key: Key) -> bool {
        if key > self.horizon {
            return false;
        }
        self.heap.push(key);
        self.peak = self.peak.max(self.len());
        true
    }

    /// Schedule `ev` at `t`; its key. Ticks and slice ends go to their lane
    /// when they come after its last key, everything else to the heap.
    #[inline]
    pub(crate) fn push(&mut self, t: Nanos, ev: Ev) -> Key {
        let k = self.key(t, ev);
        let lane = match ev {
            Ev::Tick(_) => LANE_TICK,
            Ev::SliceEnd(_) => LANE_SLICE,
            _ => {
                self.insert(k);
                return k;
            }
        };
        if k > self.horizon {
            return k;
        }
        let l = &mut self.lanes[lane];
        match l.back() {
            Some(&last) if last > k => self.heap.push(k),
            _ => l.push_back(k),
        }
        self.peak = self.peak.max(self.len());
        k
    }

    /// Nothing keyed after `k` will run (the key of the run's `End`).
    pub(crate) fn set_horizon(&mut self, k: Key) {
        self.horizon = k;
    }

    /// Whether an event keyed `k` runs before the horizon (if the run reaches it).
    #[inline]
    pub(crate) fn before_horizon(&self, k: Key) -> bool {
        k < self.horizon
    }

    /// The next event, its key and its time: the least of the heap's top and the lanes' fronts.
    #[inline]
    pub(crate) fn pop(&mut self) -> Option<(Key, Nanos, Ev)> {
        let h = self.heap.v.first().copied().unwrap_or(Key::MAX);
        let a = self.lanes[LANE_TICK].front().copied().unwrap_or(Key::MAX);
        let b = self.lanes[LANE_SLICE].front().copied().unwrap_or(Key::MAX);
        let k = if h <= a && h <= b {
            self.heap.pop()?
        } else if a <= b {
            self.lanes[LANE_TICK].pop_front()?
        } else {
            self.lanes[LANE_SLICE].pop_front()?
        };
        Some((k, key_time(k), Ev::decode(k as u64)))
    }

    /// Entries held now (heap and lanes).
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.heap.v.len() + self.lanes[0].len() + self.lanes[1].len()
    }
}

/// The lane of ticks.
const LANE_TICK: usize = 0;
/// The lane of slice ends.
const LANE_SLICE: usize = 1;

/// A 4-ary min-heap of distinct keys: the children of `i` are `4i+1 ..= 4i+4`.
#[derive(Default)]
struct QuadHeap {
    v: Vec<Key>,
}

impl QuadHeap {
    #[inline]
    fn push(&mut self, k: Key) {
        let mut i = self.v.len();
        self.v.push(k);
        while i > 0 {
            let p = (i - 1) / 4;
            if self.v[p] <= k {
                break;
            }
            self.v[i] = self.v[p];
            i = p;
        }
        self.v[i] = k;
    }

    #[inline]
    fn pop(&mut self) -> Option<Key> {
        let last = self.v.pop()?;
        let n = self.v.len();
        if n == 0 {
            return Some(last);
        }
        let top = self.v[0];
        let mut i = 0;
        loop {
            let c = 4 * i + 1;
            if c >= n {
                break;
            }
            let mut m = c;
            for j in c + 1..(c + 4).min(n) {
                if self.v[j] < self.v[m] {
                    m = j;
                }
            }
            if self.v[m] >= last {
                break;
            }
            self.v[i] = self.v[m];
            i = m;
        }
        self.v[i] = last;
        Some(top)
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

    fn drain(q: &mut EventQueue) -> Vec<(u64, Ev)> {
        std::iter::from_fn(|| q.pop()).map(|(_, t, e)| (t.0, e)).collect()
    }

    #[test]
    fn earliest_first_and_equal_times_in_scheduling_order() {
        let mut q = EventQueue::default();
        q.push(Nanos(20), Ev::Place);
        q.push(Nanos(10), Ev::Stats);
        q.push(Nanos(20), Ev::Account);
        q.push(Nanos(10), Ev::End);
        q.push(Nanos(5), Ev::Tick(CpuId(1)));
        // 5 first; the two at 10 in push order (Stats then End); the two at 20 likewise.
        assert_eq!(
            drain(&mut q),
            vec![(5, Ev::Tick(CpuId(1))), (10, Ev::Stats), (10, Ev::End), (20, Ev::Place), (20, Ev::Account)]
        );
    }

    #[test]
    fn every_kind_and_the_largest_id_round_trip_through_a_tag() {
        let big = ID_MASK as u32;
        let all = [
            Ev::Tick(CpuId(big)),
            Ev::Account,
            Ev::SliceEnd(CpuId(3)),
            Ev::OpDone(TaskId(big)),
            Ev::Wake(TaskId(7)),
            Ev::Noise(CpuId(0)),
            Ev::Place,
            Ev::Stats,
            Ev::Domain(big),
            Ev::TraceSample,
            Ev::End,
        ];
        let mut q = EventQueue::default();
        for (i, e) in all.iter().enumerate() {
            q.push(Nanos(u64::MAX - 20 + i as u64), *e);
        }
        assert_eq!(drain(&mut q).into_iter().map(|(_, e)| e).collect::<Vec<_>>(), all.to_vec());
    }

    #[test]
    fn the_heap_pops_a_shuffled_set_in_order() {
        // 1000 distinct keys in a scrambled order (multiplication by a unit mod 1000).
        let mut h = QuadHeap::default();
        for i in 0..1000u128 {
            h.push(i * 7919 % 1000);
        }
        let out: Vec<Key> = std::iter::from_fn(|| h.pop()).collect();
        assert_eq!(out, (0..1000).collect::<Vec<_>>());
    }

    #[test]
    fn lanes_and_heap_pop_in_the_heap_only_order() {
        // Ticks on a 10 ns grid and slice ends at now + 30, pushed in time order
        // with completions in between; a slice end shortened (now + 5) and a tick
        // planned earlier than the lane's last go to the heap. The pops are the keys sorted.
        let mut q = EventQueue::default();
        let mut keys = Vec::new();
        for now in (0..200u64).step_by(7) {
            keys.push(q.push(Nanos(now / 10 * 10 + 10), Ev::Tick(CpuId((now % 3) as u32))));
            keys.push(q.push(Nanos(now + 30), Ev::SliceEnd(CpuId(1))));
            keys.push(q.push(Nanos(now + 5), Ev::SliceEnd(CpuId(2))));
            keys.push(q.push(Nanos(now * 13 % 97), Ev::OpDone(TaskId(4))));
        }
        keys.push(q.push(Nanos(3), Ev::Tick(CpuId(0))));
        assert!(!q.lanes[LANE_TICK].is_empty() && !q.lanes[LANE_SLICE].is_empty());
        assert_eq!(q.len(), keys.len());
        keys.sort_unstable();
        let popped: Vec<Key> = std::iter::from_fn(|| q.pop()).map(|(k, _, _)| k).collect();
        assert_eq!(popped, keys);
    }

    #[test]
    fn nothing_is_stored_past_the_horizon() {
        let mut q = EventQueue::default();
        let end = q.push(Nanos(100), Ev::End);
        q.set_horizon(end);
        // At the horizon's time but planned after it: it would run after End, never.
        q.push(Nanos(100), Ev::Stats);
        q.push(Nanos(5_000), Ev::OpDone(TaskId(1)));
        let k = q.push(Nanos(99), Ev::Place);
        assert!(q.before_horizon(k));
        assert_eq!(q.len(), 2);
        assert_eq!(drain(&mut q), vec![(99, Ev::Place), (100, Ev::End)]);
    }
}
