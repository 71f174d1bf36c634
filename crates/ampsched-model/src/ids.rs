//! Dense integer ids for CPUs, domains (VMs or processes) and tasks (vCPUs or threads).

use serde::{Deserialize, Serialize};
use std::fmt;

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default)]
        #[serde(transparent)]
        pub struct $name(pub u32);

        impl $name {
            /// The id as a vector index.
            #[inline]
            pub fn idx(self) -> usize {
                self.0 as usize
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }
    };
}

id_type!(
    /// A physical (or simulated) CPU.
    CpuId,
    "cpu"
);
id_type!(
    /// A domain: a VM in virtualised scenarios, a process in native ones.
    DomainId,
    "d"
);
id_type!(
    /// A schedulable task: a vCPU, or a thread in native scenarios.
    TaskId,
    "t"
);
