//! The engine's side of the shared LLC (`engine::llc`): a running task that
//! starts computing joins its CPU's memory domain, one that stops leaves it,
//! and every co-runner whose cost changes is settled at its old cost and
//! re-planned at the new one (`Sim::recost`, shared with the memory bus).
//!
//! May import: `Sim` and the bottom rooms (`llc`, `task`). Must never import
//! the dispatcher or placer bridges or statistics.

use super::llc::Member;
use super::task::{Act, St, NO_SPEED};
use super::Sim;
use ampsched_model::TaskId;

impl Sim {
    /// Task `t`, running, starts computing: it joins its CPU's memory domain's
    /// LLC if its working set reaches it, and the domain's costs are set anew.
    #[cold]
    #[inline(never)]
    pub(super) fn llc_join(&mut self, t: TaskId) {
        let Some(llc) = self.llc.as_deref() else { return };
        let tk = &self.tasks[t.idx()];
        let St::Running(c) = tk.st else { return };
        if tk.act != Act::Compute || llc.of[t.idx()].is_some() || !llc.claims(tk.ws_kb) {
            return;
        }
        let speed = self.cpus[c.idx()].speed;
        let tk = &mut self.tasks[t.idx()];
        let alone = tk.cost_on(speed, &self.topo);
        let m = Member {
            task: t,
            speed,
            ws: tk.ws_kb as f64,
            exposed: tk.mem * tk.overlap.clamp(0.0, 1.0),
            alone,
            cost: alone,
        };
        let d = self.mem_domain[c.idx()];
        let llc = self.llc.as_deref_mut().expect("an LLC");
        llc.of[t.idx()] = Some(d);
        llc.doms[d as usize].push(m);
        self.llc_divide(d as usize, t);
    }

    /// Task `t` stops computing on its CPU (it leaves the LLC if it was a member).
    #[cold]
    #[inline(never)]
    pub(super) fn llc_leave(&mut self, t: TaskId) {
        let Some(llc) = self.llc.as_deref_mut() else { return };
        let Some(d) = llc.of[t.idx()].take() else { return };
        let ms = &mut llc.doms[d as usize];
        if let Some(i) = ms.iter().position(|m| m.task == t) {
            ms.remove(i);
        }
        // Its cost is its own again from its next compute on.
        self.tasks[t.idx()].cost_speed = NO_SPEED;
        self.llc_divide(d as usize, t);
    }

    /// Divide domain `d`'s LLC anew: `t` (joining or leaving) takes its new
    /// cost as is; every other member whose cost changes is settled at its
    /// old cost and re-planned at the new one.
    fn llc_divide(&mut self, d: usize, t: TaskId) {
        let mut llc = self.llc.take().expect("an LLC");
        llc.divide(d);
        let mut changed = std::mem::take(&mut llc.changed);
        for m in &llc.doms[d] {
            let tk = &mut self.tasks[m.task.idx()];
            if m.task == t {
                (tk.cost_speed, tk.cost) = (m.speed.to_bits(), m.cost);
            } else if tk.cost != m.cost {
                changed.push((m.task, m.speed, m.cost));
            }
        }
        self.llc = Some(llc);
        self.recost(&changed);
        changed.clear();
        if let Some(l) = self.llc.as_mut() {
            l.changed = changed;
        }
    }
}
