//! The event loop's clock: a queue of timed events in a total order, and the
//! FIFO of effects due at the current instant.
//!
//! Keys: 16 bytes, earliest first. A key is the event's time (integer ns,
//! the high 64 bits) and a tag (the low 64 bits): a sequence number
//! (`SEQ_BITS`), then the event's kind and id. Sequence numbers grow with
//! every event planned, so simultaneous events run in the order they were
//! scheduled (a total order), and comparing two keys as one `u128` is that
//! order; the event itself is decoded from the tag, so an entry carries no
//! payload. Pops come out in exactly the order of any other exact priority
//! queue over the same keys: the structures below (issue 19) changed where
//! keys are kept, never which pops first.
//!
//! Design: a *calendar queue* (R. Brown, "Calendar queues: a fast O(1)
//! priority queue implementation for the simulation event set problem",
//! CACM 31(10), 1988) of one fixed year: a ring of `SLOTS` time slots of
//! 2^`SLOT_BITS` ns (16384 × 2.048 µs = 33.6 ms), each a list of its keys
//! in key order, beside a binary heap for the keys due further ahead than
//! the ring reaches when they are planned (statistics and placer periods,
//! long sleeps and computes, the run's end). The queue is monotone — every
//! key stored is greater than the last one taken (time never goes back, and
//! a key made now at the current time has a greater sequence number) — so
//! the ring starts at the last key's slot, `base`, and every key it holds
//! is in one of the `SLOTS` slots from there: the first non-empty slot
//! round the ring from `base` (a bit scan of a 16384-bit mask, with a
//! 256-bit summary of its non-zero words, so a gap of any length costs a
//! few words) holds the ring's least key at its head. A push is a walk of
//! its slot's list (in `ampsched bench` XL mostly none or one key), a pop
//! takes a list's head, and a
//! key can be *withdrawn* (`cancel`: its slot is known from its time), which
//! the radix heap it replaced could not do cheaply (its keys moved between
//! buckets as keys were taken). The engine withdraws a task's completion
//! the moment it is superseded (`Sim::supersede`), so a superseded
//! completion is neither stored nor popped; it is still counted as the
//! superseded event it would have been (`events` and `superseded` are those
//! of a queue of every plan left to pop). A key in the far heap is not
//! withdrawn: it pops, and its handler finds it stale; a task keeps one such
//! entry at a time, a later plan beyond the ring waiting for it to pop
//! (`Sim::plan_op`), so a compute longer than the ring's reach, preempted
//! every slice, does not fill the far heap. In XL the radix heap
//! (base 16) moved each key 3.1 times between buckets and 1.2 M of its 7.9 M
//! pops were superseded completions; the ring took 0.95 of the radix heap's
//! CPU time in XL and 0.91 in L (interleaved pairs, see `bench.rs`).
//! Slots of 2.048 µs rather than 8.192 µs (the same reach) hold a quarter
//! of the keys each, so a push or a withdrawal walks past fewer keys, each
//! of another task and likely out of the cache: XL took 0.97-0.98 of the
//! CPU time with them, L and the studies' small machines the same within
//! noise (0.99-1.01; `bench.rs`).
//!
//! Lanes: ticks and slice ends are planned at a fixed distance from the
//! instant that plans them (a tick one period after the last, on the
//! period's grid; a slice end one slice after a switch), so nearly all come
//! in key order, and each kind keeps them in a FIFO of its own, a *lane*; one
//! planned before its lane's tail (a tick owed at a stall's end, a slice end
//! re-armed or deferred) goes to the ring (or the far heap). A pop takes the
//! least of the two lanes' heads, the far heap's top and the ring's first
//! key; whichever it is, the ring then starts at its slot. In XL every busy
//! CPU's tick falls on the same grid instants: a few hundred keys of one
//! time, which the lane holds in order already (XL: 0.976 of the CPU time
//! without lanes, 8 interleaved pairs of whole runs).
//!
//! The queue knows the run's horizon, the key of its `End` event: an event
//! keyed after it can never run, so it is not stored (a completion planned an
//! hour ahead in a 60 s run costs nothing). So the queue holds at most one
//! live completion per task, a wake-up per sleeper, a tick and a slice end
//! per CPU and a few periodic events, whatever the simulated duration.
//!
//! May import: `ampsched-model` ids and `Nanos`. Must never import the rest
//! of the engine: every other room schedules events through this one.

use ampsched_model::{CpuId, Nanos, TaskId};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

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
    /// A CPU's bursty noise switches on or off; on a CPU with traffic noise, its
    /// task is re-planned past the batches its plan looked at (`cpu::Traffic`).
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
    /// A CPU's seizure by the placer's own work may end (`place.rs`; stale unless it is the last planned).
    Seized(CpuId),
    /// The device finished the I/O of this task (`backend.rs`).
    Io(TaskId),
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
            Ev::Seized(c) => (12, c.0),
            Ev::Io(t) => (13, t.0),
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
            12 => Ev::Seized(CpuId(id)),
            13 => Ev::Io(TaskId(id)),
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
    /// Keys due within `SLOTS` slots of the last one taken (see the module essay).
    ring: Ring,
    /// Keys due later than the ring reaches when planned, earliest on top.
    far: BinaryHeap<Reverse<Key>>,
    /// Ticks (`[0]`) and slice ends (`[1]`) planned in key order, each a FIFO
    /// (see the module essay's lanes); one out of order goes to the ring.
    lanes: [VecDeque<Key>; 2],
    seq: u64,
    /// Entries held now (in the ring, the far heap and the lanes).
    len: usize,
    /// Events keyed after this never run and are not stored.
    horizon: Key,
    /// The most entries held at once.
    pub(crate) peak: usize,
}

impl Default for EventQueue {
    fn default() -> Self {
        EventQueue {
            ring: Ring::default(),
            far: BinaryHeap::new(),
            lanes: [VecDeque::new(), VecDeque::new()],
            seq: 0,
            len: 0,
            horizon: Key::MAX,
            peak: 0,
        }
    }
}

/// Where the next key comes from.
#[derive(Clone, Copy)]
enum Source {
    Lane(usize),
    Far,
    Ring(usize),
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
        if !self.ring.push(key) {
            self.far.push(Reverse(key));
        }
        self.len += 1;
        self.peak = self.peak.max(self.len);
        true
    }

    /// Whether the ring reaches `key` now (an event keyed so would be stored
    /// there, and could be withdrawn); else it would go to the far heap.
    #[inline]
    pub(crate) fn near(&self, key: Key) -> bool {
        self.ring.slot(key).is_some()
    }

    /// Withdraw the stored event keyed `key`, if the ring holds it: true
    /// then (the event will not run); false if it is not stored or waits in
    /// the far heap (it will run, and its handler must find it stale).
    #[inline]
    pub(crate) fn cancel(&mut self, key: Key) -> bool {
        let removed = self.ring.remove(key);
        self.len -= usize::from(removed);
        removed
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
            self.len += 1;
            self.peak = self.peak.max(self.len);
        } else {
            self.insert(k);
        }
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
        // The least of the lanes' heads, the far heap's top and the ring's first key.
        let [a, b] = [0, 1].map(|i| self.lanes[i].front().copied().unwrap_or(Key::MAX));
        let (mut src, mut k) = if a < b { (Source::Lane(0), a) } else { (Source::Lane(1), b) };
        if let Some(&Reverse(f)) = self.far.peek() {
            if f < k {
                (src, k) = (Source::Far, f);
            }
        }
        if let Some((slot, r)) = self.ring.first() {
            if r < k {
                (src, k) = (Source::Ring(slot), r);
            }
        }
        match src {
            Source::Ring(slot) => self.ring.take(slot),
            Source::Far => {
                self.far.pop();
            }
            Source::Lane(_) if k == Key::MAX => return None,
            Source::Lane(i) => {
                self.lanes[i].pop_front();
            }
        }
        self.len -= 1;
        self.ring.advance(k);
        Some((k, key_time(k), Ev::decode(k as u64)))
    }

    /// Entries held now (kept as they come and go; checked against the parts).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        debug_assert_eq!(self.len, self.ring.len + self.far.len() + self.lanes[0].len() + self.lanes[1].len());
        self.len
    }
}

/// Bits of a slot's width in ns: a key's slot is its time `>> SLOT_BITS` (2.048 µs).
const SLOT_BITS: u32 = 11;
/// Slots of the ring: it reaches 16384 × 2.048 µs = 33.6 ms past the last key taken.
const SLOTS: usize = 16384;
/// Words of the ring's bitmap of used slots (`Ring::used`).
const WORDS: usize = SLOTS / 64;
/// No node (the end of a slot's list).
const NIL: u32 = u32::MAX;

/// A stored key and the next of its slot.
#[derive(Clone, Copy)]
struct Node {
    key: Key,
    next: u32,
}

/// A ring of time slots (a calendar queue with one year of `SLOTS` days,
/// Brown 1988; see the module essay): slot `s mod SLOTS` holds, in key
/// order, the keys whose time `>> SLOT_BITS` is `s`, for `s` from `base`,
/// the slot of the last key taken, to `base + SLOTS − 1`.
struct Ring {
    /// The slot number (time `>> SLOT_BITS`) of the last key taken.
    base: u64,
    /// Per slot, its first node (`NIL`: empty).
    heads: Vec<u32>,
    /// Bit `s % 64` of word `s / 64` set: slot `s` is not empty.
    used: [u64; WORDS],
    /// Bit `w % 64` of word `w / 64` set: word `w` of `used` is not zero (so
    /// the next used slot is found in a few words whatever the gap).
    summary: [u64; WORDS / 64],
    /// The nodes, stored and free (a list through `next` from `free`).
    nodes: Vec<Node>,
    free: u32,
    len: usize,
}

impl Default for Ring {
    fn default() -> Self {
        Ring {
            base: 0,
            heads: vec![NIL; SLOTS],
            used: [0; WORDS],
            summary: [0; WORDS / 64],
            nodes: Vec::new(),
            free: NIL,
            len: 0,
        }
    }
}

impl Ring {
    /// The ring's slot of key `k`, if the ring reaches its time.
    #[inline]
    fn slot(&self, k: Key) -> Option<usize> {
        let s = key_time(k).0 >> SLOT_BITS;
        debug_assert!(s >= self.base, "an event keyed before the last one run");
        (s.wrapping_sub(self.base) < SLOTS as u64).then_some(s as usize & (SLOTS - 1))
    }

    /// Store `k` in its slot, in key order; false if the ring does not reach it.
    #[inline]
    fn push(&mut self, k: Key) -> bool {
        let Some(slot) = self.slot(k) else { return false };
        let n = match self.free {
            NIL => {
                self.nodes.push(Node { key: k, next: NIL });
                (self.nodes.len() - 1) as u32
            }
            f => {
                self.free = self.nodes[f as usize].next;
                self.nodes[f as usize].key = k;
                f
            }
        };
        let (mut prev, mut cur) = (NIL, self.heads[slot]);
        while cur != NIL && self.nodes[cur as usize].key < k {
            (prev, cur) = (cur, self.nodes[cur as usize].next);
        }
        self.nodes[n as usize].next = cur;
        match prev {
            NIL => self.heads[slot] = n,
            p => self.nodes[p as usize].next = n,
        }
        let w = slot / 64;
        self.used[w] |= 1 << (slot % 64);
        self.summary[w / 64] |= 1 << (w % 64);
        self.len += 1;
        true
    }

    /// Slot `slot` became empty: clear its bit, and its word's in the summary if that emptied too.
    #[inline]
    fn clear_used(&mut self, slot: usize) {
        let w = slot / 64;
        self.used[w] &= !(1 << (slot % 64));
        let nz = u64::from(self.used[w] != 0);
        let sw = &mut self.summary[w / 64];
        *sw = (*sw & !(1 << (w % 64))) | (nz << (w % 64));
    }

    /// The first word of `used` not zero, round the ring from word `from`
    /// (all of them: `from` itself last, its summary bits before `from` included).
    #[inline]
    fn next_used_word(&self, from: usize) -> Option<usize> {
        let (s0, sb) = (from / 64, from % 64);
        let m = self.summary[s0] & (u64::MAX << sb);
        if m != 0 {
            return Some(s0 * 64 + m.trailing_zeros() as usize);
        }
        let ns = WORDS / 64;
        for i in 1..=ns {
            let sw = (s0 + i) % ns;
            let m = if i == ns { self.summary[s0] & !(u64::MAX << sb) } else { self.summary[sw] };
            if m != 0 {
                return Some(sw * 64 + m.trailing_zeros() as usize);
            }
        }
        None
    }

    /// The first slot not empty from `base` on (round the ring), and its least key.
    #[inline]
    fn first(&self) -> Option<(usize, Key)> {
        if self.len == 0 {
            return None;
        }
        let b = self.base as usize & (SLOTS - 1);
        let (w0, bit) = (b / 64, b % 64);
        // The base's word from its bit, the words after it round the ring, then its bits before
        // (the base's word found last by the summary holds only bits before the base).
        let head = self.used[w0] & (u64::MAX << bit);
        let slot = if head != 0 {
            w0 * 64 + head.trailing_zeros() as usize
        } else {
            let w = self.next_used_word((w0 + 1) % WORDS).expect("a stored key in a used slot");
            w * 64 + self.used[w].trailing_zeros() as usize
        };
        Some((slot, self.nodes[self.heads[slot] as usize].key))
    }

    /// Take the least key of `slot` (from `first`).
    #[inline]
    fn take(&mut self, slot: usize) {
        let n = self.heads[slot];
        self.heads[slot] = self.nodes[n as usize].next;
        if self.heads[slot] == NIL {
            self.clear_used(slot);
        }
        self.nodes[n as usize].next = self.free;
        self.free = n;
        self.len -= 1;
    }

    /// Withdraw `k` if stored here.
    #[inline]
    fn remove(&mut self, k: Key) -> bool {
        let Some(slot) = self.slot(k) else { return false };
        let (mut prev, mut cur) = (NIL, self.heads[slot]);
        while cur != NIL && self.nodes[cur as usize].key < k {
            (prev, cur) = (cur, self.nodes[cur as usize].next);
        }
        if cur == NIL || self.nodes[cur as usize].key != k {
            return false;
        }
        let next = self.nodes[cur as usize].next;
        match prev {
            NIL => {
                self.heads[slot] = next;
                if next == NIL {
                    self.clear_used(slot);
                }
            }
            p => self.nodes[p as usize].next = next,
        }
        self.nodes[cur as usize].next = self.free;
        self.free = cur;
        self.len -= 1;
        true
    }

    /// Key `k` was taken (from here or elsewhere): the ring now starts at its slot.
    #[inline]
    fn advance(&mut self, k: Key) {
        self.base = key_time(k).0 >> SLOT_BITS;
    }

    /// The least key, if any (the ring alone).
    #[cfg(test)]
    fn pop(&mut self) -> Option<Key> {
        let (slot, k) = self.first()?;
        self.take(slot);
        self.advance(k);
        Some(k)
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
            Ev::Seized(CpuId(big)),
            Ev::React(CpuId(2)),
            Ev::Io(TaskId(big)),
        ];
        let mut q = EventQueue::default();
        for (i, e) in all.iter().enumerate() {
            q.push(Nanos(u64::MAX - 20 + i as u64), *e);
        }
        assert_eq!(drain(&mut q).into_iter().map(|(_, e)| e).collect::<Vec<_>>(), all.to_vec());
    }

    /// A key at time `t` ns with sequence number `seq` (no kind, id 0).
    fn at(t: u64, seq: u64) -> Key {
        (u128::from(t) << 64) | u128::from(seq << (ID_BITS + KIND_BITS))
    }

    #[test]
    fn the_ring_pops_a_shuffled_set_in_order() {
        // 1000 distinct keys in a scrambled order (multiplication by a unit mod
        // 1000), two or three to a slot (times 0..999 µs step 1 µs share 2.048 µs slots),
        // all pushed before the first pop.
        let mut r = Ring::default();
        for i in 0..1000u64 {
            let j = i * 7919 % 1000;
            assert!(r.push(at(j * 1000, j)));
        }
        let out: Vec<Key> = std::iter::from_fn(|| r.pop()).collect();
        assert_eq!(out, (0..1000).map(|j| at(j * 1000, j)).collect::<Vec<_>>());
    }

    #[test]
    fn a_slot_holds_its_keys_in_order_and_the_ring_reaches_33_ms() {
        // Worked example (slots of 2^11 = 2048 ns): times 2500 and 2500 (a
        // greater sequence number), 2048 and 4095 are in slot 1, listed in
        // key order; 5000 is in slot 2. The ring reaches slot 16383 (time
        // 16383 × 2048 = 33 552 384 .. 33 554 431 ns) from base 0: 33 554 432
        // is slot 16384, the far heap's.
        let mut q = EventQueue::default();
        let k = [at(2500, 2), at(2500, 3), at(2048, 4), at(5000, 5), at(4095, 6)];
        for x in k {
            q.insert(x);
        }
        q.insert(at(33_554_431, 7));
        q.insert(at(33_554_432, 8));
        assert_eq!((q.ring.len, q.far.len()), (6, 1));
        assert_eq!(q.ring.used[0], 0b110);
        assert_eq!(q.ring.used[255], 1 << 63);
        // Words 0 and 255 are not zero: bits 0 and 255 of the summary.
        assert_eq!(q.ring.summary, [1, 0, 0, 1 << 63]);
        let mut slot1 = Vec::new();
        let mut n = q.ring.heads[1];
        while n != NIL {
            slot1.push(q.ring.nodes[n as usize].key);
            n = q.ring.nodes[n as usize].next;
        }
        assert_eq!(slot1, vec![k[2], k[0], k[1], k[4]]);
        // Once the ring starts at 2048's slot (1), the far key's slot 16384 is
        // in reach: a key planned then at 33 554 433 goes to the ring, at slot
        // 16384 mod 16384 = 0, and still pops after the far one.
        assert_eq!(q.pop().map(|p| p.0), Some(k[2]));
        q.insert(at(33_554_433, 9));
        assert_eq!((q.ring.used[0] & 1, q.far.len()), (1, 1));
        let rest: Vec<Key> = std::iter::from_fn(|| q.pop()).map(|p| p.0).collect();
        assert_eq!(rest, vec![k[0], k[1], k[4], k[3], at(33_554_431, 7), at(33_554_432, 8), at(33_554_433, 9)]);
    }

    #[test]
    fn the_next_used_slot_is_found_across_words_and_round_the_ring() {
        // Worked example: slots 3 (word 0), 70 (word 1) and 9000 (word 140,
        // the summary's word 2, bit 12) pop in order, each found past empty
        // words through the summary. With the ring at slot 9001, a key at slot
        // 9001 + 16382 = 25383 wraps to slot 8999, in the base's own word
        // below its bit: found last, round the ring, and popped after 9002.
        let mut r = Ring::default();
        let s = |slot: u64, seq: u64| at(slot << SLOT_BITS, seq);
        for (slot, seq) in [(70, 1), (9000, 2), (3, 3)] {
            assert!(r.push(s(slot, seq)));
        }
        assert_eq!(r.summary, [0b11, 0, 1 << 12, 0]);
        assert_eq!([r.pop(), r.pop(), r.pop()], [Some(s(3, 3)), Some(s(70, 1)), Some(s(9000, 2))]);
        assert_eq!(r.summary, [0; 4]);
        assert!(r.push(s(9001, 4)));
        assert_eq!(r.pop(), Some(s(9001, 4)));
        assert!(r.push(s(25_383, 5)));
        assert!(r.push(s(9002, 6)));
        assert_eq!([r.pop(), r.pop(), r.pop()], [Some(s(9002, 6)), Some(s(25_383, 5)), None]);
        assert_eq!((r.used, r.summary), ([0; WORDS], [0; 4]));
    }

    #[test]
    fn a_cancelled_key_never_pops_and_a_far_one_cannot_be_cancelled() {
        let mut q = EventQueue::default();
        let a = q.push(Nanos(100), Ev::OpDone(TaskId(1)));
        let b = q.push(Nanos(100), Ev::OpDone(TaskId(2)));
        let c = q.push(Nanos(200), Ev::OpDone(TaskId(3)));
        let far = q.push(Nanos(1_000_000_000), Ev::OpDone(TaskId(4)));
        assert!(q.cancel(b));
        assert!(!q.cancel(b), "already withdrawn");
        assert!(!q.cancel(far), "waits in the far heap");
        assert!(q.cancel(a));
        assert_eq!(q.len(), 2);
        assert_eq!(drain(&mut q), vec![(200, Ev::OpDone(TaskId(3))), (1_000_000_000, Ev::OpDone(TaskId(4)))]);
        let _ = c;
        // A freed node is used again.
        assert_eq!(q.ring.nodes.len(), 3);
        q.push(Nanos(1_000_000_001), Ev::Stats);
        assert_eq!(q.ring.nodes.len(), 3);
    }

    #[test]
    fn pushes_and_cancels_between_pops_come_out_in_key_order() {
        // A run's pattern: pop the least, push a few keys after it (ticks on a
        // 10 µs grid, a slice end at now + 30 µs, a completion at now + 0..97
        // ms — some past the ring's reach — one at now itself with a greater
        // sequence number), and withdraw every third completion planned.
        // Against a sorted reference over 5000 pops.
        let mut q = EventQueue::default();
        let mut reference = std::collections::BTreeSet::new();
        let push = |q: &mut EventQueue, r: &mut std::collections::BTreeSet<Key>, t: u64, ev: Ev| {
            let k = q.push(Nanos(t), ev);
            r.insert(k);
            k
        };
        push(&mut q, &mut reference, 0, Ev::Stats);
        let mut popped = 0;
        let mut cancelled = 0;
        while let Some((k, t, _)) = q.pop() {
            assert_eq!(Some(k), reference.pop_first(), "pop {popped}");
            popped += 1;
            if popped > 5000 {
                break;
            }
            let now = t.0;
            push(&mut q, &mut reference, now / 10_000 * 10_000 + 10_000, Ev::Tick(CpuId((now % 3) as u32)));
            push(&mut q, &mut reference, now + 30_000, Ev::SliceEnd(CpuId(1)));
            let c = push(&mut q, &mut reference, now + (now * 13 % 97) * 1_000_000, Ev::OpDone(TaskId(4)));
            if popped % 3 == 0 && q.cancel(c) {
                reference.remove(&c);
                cancelled += 1;
            }
            if popped % 5 == 0 {
                push(&mut q, &mut reference, now, Ev::Wake(TaskId(2)));
            }
        }
        assert!(popped > 5000 && cancelled > 100, "{popped} {cancelled}");
        assert_eq!(q.len(), reference.len());
    }

    #[test]
    fn ticks_out_of_their_lanes_order_go_to_the_ring() {
        // Ticks at 10, 20 (in order: the lane), then one at 15 (before the
        // lane's tail: the ring); a slice end at 12 in its own lane. All pop in time order.
        let mut q = EventQueue::default();
        q.push(Nanos(10), Ev::Tick(CpuId(0)));
        q.push(Nanos(20), Ev::Tick(CpuId(1)));
        q.push(Nanos(15), Ev::Tick(CpuId(2)));
        q.push(Nanos(12), Ev::SliceEnd(CpuId(0)));
        q.push(Nanos(11), Ev::Stats);
        assert_eq!((q.lanes[0].len(), q.lanes[1].len(), q.ring.len), (2, 1, 2));
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
