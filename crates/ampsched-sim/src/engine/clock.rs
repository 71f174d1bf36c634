//! The event loop's clock: a queue of timed events in a total order, and the
//! FIFO of effects due at the current instant.
//!
//! Design: a *radix heap* of 16-byte keys, earliest first (Ahuja, Mehlhorn,
//! Orlin and Tarjan, "Faster algorithms for the shortest path problem",
//! J. ACM 37(2), 1990, section 3: a monotone priority queue). A key is the
//! event's time (integer ns, the high 64 bits) and a tag (the low 64 bits):
//! a sequence number (`SEQ_BITS`), then the event's kind and id. Sequence
//! numbers grow with every event planned, so simultaneous events run in the
//! order they were scheduled (a total order), and comparing two keys as one
//! `u128` is that order; the event itself is decoded from the tag, so an
//! entry carries no payload.
//!
//! The queue is monotone: every key stored is greater than the last one
//! popped (time never goes back, and a key made now at the current time has
//! a greater sequence number), which is what a radix heap needs. Keys are
//! read in base 16 (32 digits of 4 bits): bucket `(l, d)` holds the keys
//! whose highest digit differing from the last key popped is digit `l`, and
//! whose value there is `d`. Every key of bucket `(l, d)` is less than every
//! key of a bucket `(l', d')` with `l < l'`, or `l = l'` and `d < d'`, so the
//! least key is in the lowest non-empty bucket in that order (a bit scan of
//! a 512-bit mask). A push is
//! an append to its bucket (no sifting, no comparisons); a pop takes the
//! lowest bucket's least key and moves the others to lower buckets relative
//! to it, so each key moves a few times in its life at most (at most once
//! per digit). Pops come out in exactly the order of any other exact
//! priority queue over the same keys (the 4-ary heap with FIFO lanes for
//! ticks and slice ends it replaced, issue 19): the same keys are stored,
//! only where differs. In `ampsched bench` L and XL the 4-ary heap's pop
//! was a sixth to a fifth of all CPU time; in XL base 2 (a bucket per bit)
//! moved 5.8 keys per pop, base 16 moves 3.1 (45.6 M moves → 24.8 M in 7.9 M
//! pops), for about 1.5 % of the run's CPU time.
//!
//! Lanes: ticks and slice ends are planned at a fixed distance from the
//! instant that plans them (a tick one period after the last, on the
//! period's grid; a slice end one slice after a switch), so nearly all come
//! in key order, and each kind keeps them in a FIFO of its own, a *lane*; one
//! planned before its lane's tail (a tick owed at a stall's end, a slice end
//! re-armed or deferred) goes to the heap. A pop takes the least of the two
//! lanes' heads and the heap's least key. A lane key taken becomes the
//! heap's `last` too: no stored key is less, and only the lowest bucket can
//! hold keys that now differ from `last` first at a lower digit (any other
//! bucket's keys would be less than that lane key), so only it may have to
//! move down (`RadixHeap::advance`). In XL every busy CPU's tick falls on
//! the same grid instants: a few hundred keys of one time that the heap
//! sorted digit by digit of their sequence numbers, which the lane holds
//! in order already (XL: 0.976 of the CPU time without lanes, 8 interleaved
//! pairs of whole runs).
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
    heap: RadixHeap,
    /// Ticks (`[0]`) and slice ends (`[1]`) planned in key order, each a FIFO
    /// (see the module essay's lanes); one out of order goes to the heap.
    lanes: [VecDeque<Key>; 2],
    seq: u64,
    /// Events keyed after this never run and are not stored.
    horizon: Key,
    /// The most entries held at once.
    pub(crate) peak: usize,
}

impl Default for EventQueue {
    fn default() -> Self {
        EventQueue {
            heap: RadixHeap::default(),
            lanes: [VecDeque::new(), VecDeque::new()],
            seq: 0,
            horizon: Key::MAX,
            peak: 0,
        }
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

    /// Store an event under `key` (from `key`); false if it is past the horizon.
    #[inline]
    pub(crate) fn insert(&mut self, key: Key) -> bool {
        if key > self.horizon {
            return false;
        }
        self.heap.push(key);
        self.peak = self.peak.max(self.len());
        true
    }

    /// Schedule `ev` at `t` (not before the last event popped); its key.
    #[inline]
    pub(crate) fn push(&mut self, t: Nanos, ev: Ev) -> Key {
        let k = self.key(t, ev);
        let lane = match ev {
            Ev::Tick(_) => 0,
            Ev::SliceEnd(_) => 1,
            _ => {
                self.insert(k);
                return k;
            }
        };
        if k > self.horizon {
            return k;
        }
        let q = &mut self.lanes[lane];
        if q.back().is_none_or(|&b| b < k) {
            q.push_back(k);
        } else {
            self.heap.push(k);
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

    /// The next event, its key and its time.
    #[inline]
    pub(crate) fn pop(&mut self) -> Option<(Key, Nanos, Ev)> {
        // The lanes' least head, then the heap's least if it is earlier.
        let [a, b] = [0, 1].map(|i| self.lanes[i].front().copied().unwrap_or(Key::MAX));
        let (lane, head) = if a < b { (0, a) } else { (1, b) };
        let k = match self.heap.pop_before(head) {
            Some(k) => k,
            None if head == Key::MAX => return None,
            None => {
                self.lanes[lane].pop_front();
                self.heap.advance(head);
                head
            }
        };
        Some((k, key_time(k), Ev::decode(k as u64)))
    }

    /// Entries held now.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.heap.len + self.lanes[0].len() + self.lanes[1].len()
    }
}

/// Bits of a key's digit: a key is read as 32 digits of 4 bits.
const DIGIT_BITS: u32 = 4;
/// Values of a digit.
const RADIX: usize = 1 << DIGIT_BITS;
/// Buckets: one per (digit position, digit value).
const NBUCKETS: usize = 128 / DIGIT_BITS as usize * RADIX;

/// A radix heap of distinct keys, each pushed greater than the last popped
/// (see the module essay), read in base 16: bucket `RADIX × l + d` holds the
/// keys whose highest digit differing from `last` is digit `l`, and is `d`
/// there.
struct RadixHeap {
    /// The last key popped (0 before the first).
    last: Key,
    buckets: Vec<Vec<Key>>,
    /// Bit `b % 64` of word `b / 64` set: bucket `b` is not empty.
    used: [u64; NBUCKETS / 64],
    len: usize,
}

impl Default for RadixHeap {
    fn default() -> Self {
        RadixHeap { last: 0, buckets: vec![Vec::new(); NBUCKETS], used: [0; NBUCKETS / 64], len: 0 }
    }
}

impl RadixHeap {
    /// The bucket of `k` relative to `last`: its highest digit differing
    /// from it, and its value there (`k` differs from `last`).
    #[inline]
    fn bucket(k: Key, last: Key) -> usize {
        let l = (127 - (k ^ last).leading_zeros()) / DIGIT_BITS;
        ((l as usize) << DIGIT_BITS) | ((k >> (l * DIGIT_BITS)) as usize & (RADIX - 1))
    }

    #[inline]
    fn mark(&mut self, b: usize) {
        self.used[b / 64] |= 1 << (b % 64);
    }

    #[inline]
    fn push(&mut self, k: Key) {
        // A key not after the last popped would be lost in the order: time went backwards.
        assert!(k > self.last, "an event keyed before the last one run");
        let b = Self::bucket(k, self.last);
        self.buckets[b].push(k);
        self.mark(b);
        self.len += 1;
    }

    /// The lowest bucket not empty.
    #[inline]
    fn lowest(&self) -> Option<usize> {
        let w = self.used.iter().position(|w| *w != 0)?;
        Some(w * 64 + self.used[w].trailing_zeros() as usize)
    }

    /// The least key, if any.
    #[cfg(test)]
    fn pop(&mut self) -> Option<Key> {
        self.pop_before(Key::MAX)
    }

    /// The least key if it is less than `bound` (a key not stored here), else
    /// nothing (and nothing changes).
    #[inline]
    fn pop_before(&mut self, bound: Key) -> Option<Key> {
        let b = self.lowest()?;
        let bucket = &mut self.buckets[b];
        if bucket.len() == 1 {
            // The common case: one key there, nothing to move.
            let k = bucket[0];
            if k > bound {
                return None;
            }
            bucket.clear();
            self.used[b / 64] &= !(1 << (b % 64));
            self.len -= 1;
            self.last = k;
            return Some(k);
        }
        let m = bucket.iter().copied().min().expect("a used bucket");
        if m > bound {
            return None;
        }
        self.len -= 1;
        self.used[b / 64] &= !(1 << (b % 64));
        let mut keys = std::mem::take(bucket);
        self.last = m;
        // The others now differ from `m` first at a lower digit: each goes to a lower bucket.
        for &k in &keys {
            if k != m {
                let nb = Self::bucket(k, m);
                self.buckets[nb].push(k);
                self.mark(nb);
            }
        }
        keys.clear();
        self.buckets[b] = keys;
        Some(m)
    }

    /// A key `k` less than every key stored (and greater than `last`) was
    /// taken from elsewhere (a lane): it becomes `last`. Only the lowest
    /// bucket can hold keys whose highest digit differing from `k` is lower
    /// than from the old `last` (module essay), and only if `k` has that
    /// bucket's digit; those keys move down, relative to `k`.
    #[inline]
    fn advance(&mut self, k: Key) {
        debug_assert!(k > self.last, "a key taken before the last one");
        if let Some(b) = self.lowest() {
            let l = (b >> DIGIT_BITS) as u32;
            if (k >> (l * DIGIT_BITS)) as usize & (RADIX - 1) == b & (RADIX - 1) {
                self.used[b / 64] &= !(1 << (b % 64));
                let mut keys = std::mem::take(&mut self.buckets[b]);
                for &x in &keys {
                    debug_assert!(x > k, "a key taken from a lane after a stored one");
                    let nb = Self::bucket(x, k);
                    self.buckets[nb].push(x);
                    self.mark(nb);
                }
                keys.clear();
                self.buckets[b] = keys;
            }
        }
        self.last = k;
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
        // 1000 distinct keys in a scrambled order (multiplication by a unit mod 1000),
        // all pushed before the first pop.
        let mut h = RadixHeap::default();
        for i in 0..1000u128 {
            h.push(1 + i * 7919 % 1000);
        }
        let out: Vec<Key> = std::iter::from_fn(|| h.pop()).collect();
        assert_eq!(out, (1..=1000).collect::<Vec<_>>());
    }

    #[test]
    fn pushes_between_pops_come_out_in_key_order() {
        // A run's pattern: pop the least, push a few keys after it (ticks on a
        // 10 ns grid, a slice end at now + 30, a completion at now + 0..97, one
        // at now itself with a greater sequence number). Worked example of the
        // buckets first, in base 16: with nothing popped (last = 0), keys 0x12,
        // 0x15 and 0x13 differ from it first at digit 1, where they are 1
        // (bucket 16 + 1), and 0x31 is 3 there (bucket 16 + 3). The first pop
        // takes bucket 17's least, 0x12, and moves the other two by their
        // digit 0 (0x15 to bucket 5, 0x13 to bucket 3): 0x13 and 0x15 then pop
        // from their own buckets, before 0x31, without a comparison.
        let mut h = RadixHeap::default();
        for k in [0x12u128, 0x15, 0x31, 0x13] {
            h.push(k);
        }
        assert_eq!(h.used[0], 1 << 17 | 1 << 19);
        assert_eq!(h.pop(), Some(0x12));
        assert_eq!(h.used[0], 1 << 3 | 1 << 5 | 1 << 19);
        assert_eq!((h.pop(), h.pop(), h.pop(), h.pop()), (Some(0x13), Some(0x15), Some(0x31), None));
        // Against a sorted reference over 2000 pops.
        let mut q = EventQueue::default();
        let mut reference = std::collections::BTreeSet::new();
        let push = |q: &mut EventQueue, r: &mut std::collections::BTreeSet<Key>, t: u64, ev: Ev| {
            r.insert(q.push(Nanos(t), ev));
        };
        push(&mut q, &mut reference, 0, Ev::Stats);
        let mut popped = 0;
        while let Some((k, t, _)) = q.pop() {
            assert_eq!(Some(k), reference.pop_first(), "pop {popped}");
            popped += 1;
            if popped > 2000 {
                break;
            }
            let now = t.0;
            push(&mut q, &mut reference, now / 10 * 10 + 10, Ev::Tick(CpuId((now % 3) as u32)));
            push(&mut q, &mut reference, now + 30, Ev::SliceEnd(CpuId(1)));
            push(&mut q, &mut reference, now + now * 13 % 97, Ev::OpDone(TaskId(4)));
            if popped % 5 == 0 {
                push(&mut q, &mut reference, now, Ev::Wake(TaskId(2)));
            }
        }
        assert!(popped > 2000);
        assert_eq!(q.len(), reference.len());
    }

    #[test]
    fn a_key_taken_from_a_lane_moves_the_lowest_bucket_down_when_it_shares_its_digit() {
        // Keys 0x15 and 0x17 sit in bucket 16 + 1 (digit 1 is 1, last = 0). A
        // lane's 0x14 comes first: relative to it they differ first at digit
        // 0, so they move to buckets 5 and 7; a later push of 0x16 (bucket 6
        // relative to 0x14) then pops between them. Without the move 0x16
        // would pop before 0x15.
        let mut h = RadixHeap::default();
        h.push(0x15);
        h.push(0x17);
        assert_eq!(h.pop_before(0x14), None);
        h.advance(0x14);
        assert_eq!(h.used[0], 1 << 5 | 1 << 7);
        h.push(0x16);
        assert_eq!((h.pop(), h.pop(), h.pop(), h.pop()), (Some(0x15), Some(0x16), Some(0x17), None));
        // A lane key with another digit there leaves the bucket as it is:
        // 0x25 and 0x27 (bucket 16 + 2) stay put when 0x1f is taken.
        for k in [0x25u128, 0x27] {
            h.push(k);
        }
        h.advance(0x1f);
        assert_eq!(h.used[0], 1 << 18);
        assert_eq!((h.pop(), h.pop()), (Some(0x25), Some(0x27)));
    }

    #[test]
    fn ticks_out_of_their_lanes_order_go_to_the_heap() {
        // Ticks at 10, 20 (in order: the lane), then one at 15 (before the
        // lane's tail: the heap); a slice end at 12 in its own lane. All pop in time order.
        let mut q = EventQueue::default();
        q.push(Nanos(10), Ev::Tick(CpuId(0)));
        q.push(Nanos(20), Ev::Tick(CpuId(1)));
        q.push(Nanos(15), Ev::Tick(CpuId(2)));
        q.push(Nanos(12), Ev::SliceEnd(CpuId(0)));
        q.push(Nanos(11), Ev::Stats);
        assert_eq!((q.lanes[0].len(), q.lanes[1].len(), q.heap.len), (2, 1, 2));
        assert_eq!(
            drain(&mut q),
            vec![
                (10, Ev::Tick(CpuId(0))),
                (11, Ev::Stats),
                (12, Ev::SliceEnd(CpuId(0))),
                (15, Ev::Tick(CpuId(2))),
                (20, Ev::Tick(CpuId(1)))
            ]
        );
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
