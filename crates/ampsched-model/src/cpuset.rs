//! A fixed-size CPU bitmask (up to 1024 CPUs), cheap to copy and compare.

use crate::ids::CpuId;
use serde::{Deserialize, Serialize};
use std::fmt;

const WORDS: usize = 16;

/// The largest number of CPUs a `CpuSet` can hold.
pub const MAX_CPUS: usize = WORDS * 64;

/// A set of CPUs as a bitmask; iteration is in ascending CPU order.
///
/// `hi` is an upper bound on the number of words in use, so operations on a
/// 256-CPU machine touch 4 words, not 16.
#[derive(Clone, Copy, Default)]
pub struct CpuSet {
    words: [u64; WORDS],
    hi: u8,
}

impl PartialEq for CpuSet {
    fn eq(&self, o: &CpuSet) -> bool {
        let n = self.hi.max(o.hi) as usize;
        self.words[..n] == o.words[..n]
    }
}
impl Eq for CpuSet {}

impl std::hash::Hash for CpuSet {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        let mut n = self.hi as usize;
        while n > 0 && self.words[n - 1] == 0 {
            n -= 1;
        }
        self.words[..n].hash(h);
    }
}

impl CpuSet {
    /// The empty set.
    pub const fn new() -> CpuSet {
        CpuSet { words: [0; WORDS], hi: 0 }
    }
    /// CPUs `0..n`.
    pub fn first_n(n: usize) -> CpuSet {
        let mut s = CpuSet::new();
        for c in 0..n {
            s.insert(CpuId(c as u32));
        }
        s
    }
    /// A set with one CPU.
    pub fn single(c: CpuId) -> CpuSet {
        let mut s = CpuSet::new();
        s.insert(c);
        s
    }
    /// Build from an iterator of CPUs.
    pub fn from_cpus<I: IntoIterator<Item = CpuId>>(it: I) -> CpuSet {
        let mut s = CpuSet::new();
        for c in it {
            s.insert(c);
        }
        s
    }
    /// Add a CPU.
    #[inline]
    pub fn insert(&mut self, c: CpuId) {
        let i = c.idx();
        assert!(i < MAX_CPUS, "cpu id {i} exceeds CpuSet capacity {MAX_CPUS}");
        self.words[i / 64] |= 1u64 << (i % 64);
        self.hi = self.hi.max((i / 64 + 1) as u8);
    }
    /// Remove a CPU.
    #[inline]
    pub fn remove(&mut self, c: CpuId) {
        let i = c.idx();
        if i < MAX_CPUS {
            self.words[i / 64] &= !(1u64 << (i % 64));
        }
    }
    /// Membership test.
    #[inline]
    pub fn contains(&self, c: CpuId) -> bool {
        let i = c.idx();
        i < MAX_CPUS && self.words[i / 64] & (1u64 << (i % 64)) != 0
    }
    /// True when no CPU is in the set.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.words[..self.hi as usize].iter().all(|w| *w == 0)
    }
    /// Number of CPUs in the set.
    #[inline]
    pub fn len(&self) -> usize {
        self.words[..self.hi as usize].iter().map(|w| w.count_ones() as usize).sum()
    }
    /// Intersection.
    #[inline]
    pub fn and(&self, o: &CpuSet) -> CpuSet {
        let n = self.hi.min(o.hi);
        let mut r = CpuSet { words: [0; WORDS], hi: n };
        for i in 0..n as usize {
            r.words[i] = self.words[i] & o.words[i];
        }
        r
    }
    /// Union.
    #[inline]
    pub fn or(&self, o: &CpuSet) -> CpuSet {
        let mut r = *self;
        r.hi = self.hi.max(o.hi);
        for i in 0..o.hi as usize {
            r.words[i] |= o.words[i];
        }
        r
    }
    /// Difference (`self` minus `o`).
    #[inline]
    pub fn and_not(&self, o: &CpuSet) -> CpuSet {
        let mut r = *self;
        for i in 0..self.hi.min(o.hi) as usize {
            r.words[i] &= !o.words[i];
        }
        r
    }
    /// True when the sets share a CPU.
    #[inline]
    pub fn intersects(&self, o: &CpuSet) -> bool {
        let n = self.hi.min(o.hi) as usize;
        self.words[..n].iter().zip(o.words[..n].iter()).any(|(a, b)| a & b != 0)
    }
    /// The lowest CPU in the set.
    #[inline]
    pub fn first(&self) -> Option<CpuId> {
        self.next_from(0)
    }
    /// The lowest CPU with index ≥ `from`.
    #[inline]
    pub fn next_from(&self, from: usize) -> Option<CpuId> {
        let hi = self.hi as usize;
        if from >= hi * 64 {
            return None;
        }
        let mut w = from / 64;
        let mut bits = self.words[w] & (!0u64 << (from % 64));
        loop {
            if bits != 0 {
                return Some(CpuId((w * 64 + bits.trailing_zeros() as usize) as u32));
            }
            w += 1;
            if w == hi {
                return None;
            }
            bits = self.words[w];
        }
    }
    /// Xen's `cpumask_cycle`: the next CPU after `c` in the set, wrapping around
    /// (may return `c` itself when it is the only member).
    #[inline]
    pub fn cycle(&self, c: CpuId) -> Option<CpuId> {
        self.next_from(c.idx() + 1).or_else(|| self.first())
    }
    /// Word `i` of the bitmask: CPUs `64·i ..= 64·i + 63`, bit `c % 64` for CPU `c`
    /// (0 past the last word in use), for word-wise set arithmetic without a temporary set.
    #[inline]
    pub fn word(&self, i: usize) -> u64 {
        if i < self.hi as usize {
            self.words[i]
        } else {
            0
        }
    }
    /// Iterate CPUs in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = CpuId> + '_ {
        let mut next = 0usize;
        std::iter::from_fn(move || {
            let c = self.next_from(next)?;
            next = c.idx() + 1;
            Some(c)
        })
    }
    /// Parse a Linux-style CPU list such as `0-3,8,10-11`.
    pub fn parse_list(s: &str) -> Result<CpuSet, String> {
        let mut set = CpuSet::new();
        let s = s.trim();
        if s.is_empty() {
            return Ok(set);
        }
        for part in s.split(',') {
            let part = part.trim();
            let (a, b) = match part.split_once('-') {
                Some((a, b)) => (a.trim(), b.trim()),
                None => (part, part),
            };
            let a: usize = a.parse().map_err(|_| format!("`{part}` is not a CPU number or range"))?;
            let b: usize = b.parse().map_err(|_| format!("`{part}` is not a CPU number or range"))?;
            if a > b || b >= MAX_CPUS {
                return Err(format!("`{part}` is not a valid CPU range (0..{MAX_CPUS})"));
            }
            for c in a..=b {
                set.insert(CpuId(c as u32));
            }
        }
        Ok(set)
    }
    /// Format as a Linux-style CPU list (`0-3,8`).
    pub fn to_list(&self) -> String {
        let mut out = String::new();
        let mut it = self.iter().peekable();
        while let Some(start) = it.next() {
            let mut end = start;
            while let Some(&n) = it.peek() {
                if n.0 == end.0 + 1 {
                    end = n;
                    it.next();
                } else {
                    break;
                }
            }
            if !out.is_empty() {
                out.push(',');
            }
            if start == end {
                out.push_str(&start.0.to_string());
            } else {
                out.push_str(&format!("{}-{}", start.0, end.0));
            }
        }
        out
    }
}

/// Visit the CPUs of the bitmask `words` (word `i` holds CPUs `64·i ..= 64·i + 63`)
/// in the order of repeated [`CpuSet::cycle`] from `from`: those after `from`
/// ascending, then from the lowest up to `from` itself; each once, until `f`
/// returns true. Returns the CPU `f` accepted. So `cycle_visit(w, c, |_| true)`
/// is `cycle(c)` of the set `w` without building it.
#[inline]
pub fn cycle_visit(words: &[u64], from: CpuId, mut f: impl FnMut(CpuId) -> bool) -> Option<CpuId> {
    let nw = words.len();
    if nw == 0 {
        return None;
    }
    let start = from.idx() + 1;
    let start = if start >= nw * 64 { 0 } else { start };
    let (sw, sb) = (start / 64, start % 64);
    let low = (1u64 << sb) - 1; // bits of word `sw` before `start`
                                // Word `sw` from `start`, the words after it, the words before it, word `sw` before `start`.
    let mut i = sw;
    let mut bits = words.get(sw).map_or(0, |w| w & !low);
    let mut pass = 0;
    loop {
        while bits != 0 {
            let c = CpuId((i * 64 + bits.trailing_zeros() as usize) as u32);
            if f(c) {
                return Some(c);
            }
            bits &= bits - 1;
        }
        i += 1;
        if pass == 0 && i == nw {
            (pass, i) = (1, 0);
        }
        if pass == 1 && i == sw {
            if low == 0 || sw >= nw {
                return None;
            }
            (pass, bits) = (2, words[sw] & low);
            continue;
        }
        if pass == 2 {
            return None;
        }
        bits = words[i];
    }
}

impl fmt::Debug for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CpuSet[{}]", self.to_list())
    }
}

impl Serialize for CpuSet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_list())
    }
}

impl<'de> Deserialize<'de> for CpuSet {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<CpuSet, D::Error> {
        let s = String::deserialize(d)?;
        CpuSet::parse_list(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cycle_visit_follows_repeated_cycle() {
        // CPUs 3, 64, 70, 130 in three words: from 64 the order is 70, 130, 3, 64
        // (after 64 ascending, then wrap to the lowest, 64 itself last), as cycle() walks it.
        let s = CpuSet::from_cpus([3, 64, 70, 130].map(CpuId));
        let words: Vec<u64> = (0..3).map(|i| s.word(i)).collect();
        for from in [0u32, 3, 63, 64, 69, 70, 130, 191, 500] {
            let mut seen = Vec::new();
            cycle_visit(&words, CpuId(from), |c| {
                seen.push(c.0);
                false
            });
            let mut want = Vec::new();
            let mut c = CpuId(from);
            for _ in 0..4 {
                c = s.cycle(c).unwrap();
                want.push(c.0);
            }
            assert_eq!(seen, want, "from {from}");
        }
        assert_eq!(cycle_visit(&words, CpuId(64), |c| c.0 < 10), Some(CpuId(3)));
        assert_eq!(cycle_visit(&[0, 0], CpuId(5), |_| true), None);
        assert_eq!(cycle_visit(&[], CpuId(5), |_| true), None);
        // One word, from its last CPU: wraps to the lowest.
        assert_eq!(cycle_visit(&[0b1010], CpuId(63), |_| true), Some(CpuId(1)));
        assert_eq!(cycle_visit(&[0b1010], CpuId(1), |_| true), Some(CpuId(3)));
        assert_eq!(cycle_visit(&[0b1010], CpuId(3), |_| true), Some(CpuId(1)));
        assert_eq!(s.word(2), 1 << 2);
        assert_eq!(s.word(7), 0);
    }

    #[test]
    fn list_round_trip_and_cycle() {
        let s = CpuSet::parse_list("0-3,8,10-11").unwrap();
        assert_eq!(s.len(), 7);
        assert_eq!(s.to_list(), "0-3,8,10-11");
        // cycling after 3 goes to 8, after 11 wraps to 0
        assert_eq!(s.cycle(CpuId(3)), Some(CpuId(8)));
        assert_eq!(s.cycle(CpuId(11)), Some(CpuId(0)));
        assert!(CpuSet::parse_list("3-1").is_err());
        assert!(CpuSet::parse_list("x").is_err());
    }

    #[test]
    fn equality_ignores_the_word_bound() {
        let mut a = CpuSet::parse_list("0,200").unwrap();
        a.remove(CpuId(200));
        assert_eq!(a, CpuSet::single(CpuId(0)));
        assert_eq!(a.len(), 1);
        assert!(CpuSet::new().is_empty() && CpuSet::new().first().is_none());
    }

    #[test]
    fn set_algebra() {
        let a = CpuSet::parse_list("0-5").unwrap();
        let b = CpuSet::parse_list("4-200").unwrap();
        assert_eq!(a.and(&b).to_list(), "4-5");
        assert_eq!(a.and_not(&b).to_list(), "0-3");
        assert_eq!(a.or(&b).len(), 201);
        assert_eq!(b.iter().last(), Some(CpuId(200)));
    }
}
