//! The state of the Linux agent's body around the placer (`SimConfig::agent`):
//! its gate and back-off (`ampsched_policy::gate::body::Body`), the reaction
//! to an idle fast CPU planned, and when the agent last applied changes. The
//! behaviour is in `place` (the placer bridge); this room only holds the
//! state, so the `Sim` can own it.
//!
//! May import: `config` and the policy crate. Must never import `Sim` or any
//! other room.

use super::config::AgentBody;
use ampsched_model::{CpuId, Nanos};
use ampsched_policy::gate::backoff::BackoffParams;
use ampsched_policy::gate::body::Body;
use ampsched_policy::gate::cooperate::Confined;
use ampsched_policy::AffinityChange;

/// The agent's body around the placer: its gate and back-off state, and the reaction planned.
pub(crate) struct Gate {
    pub(super) body: Body,
    pub(super) reaction: Nanos,
    /// A reaction is planned: the CPU of the last switch to idle since, and its time.
    pub(super) pending: Option<(CpuId, Nanos)>,
    /// When the agent's changes were last applied (a period's, or a reaction's).
    pub(super) applied_at: Nanos,
    /// A reaction's threads and changes, kept from one reaction to the next: filled anew, not allocated.
    pub(super) threads: Vec<Confined>,
    pub(super) changes: Vec<AffinityChange>,
}

impl Gate {
    /// The body `a` describes, every group managed.
    pub(crate) fn new(a: AgentBody) -> Gate {
        let backoff = a.backoff.then(BackoffParams::default);
        Gate {
            body: Body::new(backoff),
            reaction: a.reaction,
            pending: None,
            applied_at: Nanos::ZERO,
            threads: Vec::new(),
            changes: Vec::new(),
        }
    }
}
