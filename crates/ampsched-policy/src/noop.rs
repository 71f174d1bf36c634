//! The `none` placer: changes nothing. It exists so that "no placer" is an
//! ordinary policy with a period (the simulator still samples snapshots).

use crate::placer::{AffinityChange, Placer, Snapshot};
use ampsched_model::{Nanos, Topology};

/// A placer that never changes an affinity.
pub struct NoPlacer {
    period: Nanos,
}

impl NoPlacer {
    /// A no-op placer with the given period.
    pub fn new(period: Nanos) -> NoPlacer {
        NoPlacer { period }
    }
}

impl Placer for NoPlacer {
    fn name(&self) -> &'static str {
        "none"
    }
    fn period(&self) -> Nanos {
        self.period
    }
    fn place(&mut self, _topo: &Topology, _snap: &Snapshot, _out: &mut Vec<AffinityChange>) {}
}
