//! Statistics on `Sim`: time-series samples every `stats_interval`, and the
//! run's results (per task, domain and CPU) at the end.
//!
//! May import: `Sim`, the bottom rooms and `crate::results`. Must never
//! import the interpreter or the bridges.

use super::fixed;
use super::task::St;
use super::Sim;
use crate::results::{ClassTimes, CpuResult, DomainResult, EngineFigures, Periodic, RunResult, TaskResult};
use ampsched_model::TaskId;

impl Sim {
    /// Close a statistics interval (`last`: the one ending the run).
    pub(super) fn sample_series(&mut self, last: bool) {
        let now = self.now;
        for i in 0..self.tasks.len() {
            if let St::Running(_) = self.tasks[i].st {
                self.settle(TaskId(i as u32));
            }
        }
        // Each domain's run time per class in the interval: what its tasks ran since
        // the last sample (a settle adds to the task's books only; `Series::add_run`).
        let nclass = self.topo.classes.len();
        for (i, tk) in self.tasks.iter().enumerate() {
            for c in 0..nclass {
                let (now_ns, seen) = (tk.run_by_class.get(c), &mut self.sampled[i * nclass + c]);
                if now_ns != *seen {
                    self.series.add_run(tk.domain.idx(), c, now_ns - *seen);
                    *seen = now_ns;
                }
            }
        }
        let values = self.disp.counters().into_iter().map(|(_, v)| v).collect();
        self.series.sample(now, values, last);
    }

    pub(super) fn finish(mut self) -> RunResult {
        if let Some(tr) = self.trace.take() {
            tr.finish();
        }
        let now = self.now;
        for i in 0..self.tasks.len() {
            let t = TaskId(i as u32);
            self.settle(t);
            let st = self.tasks[i].st;
            self.set_state(t, st);
        }
        for c in 0..self.cpus.len() {
            self.flush_cpu(c);
        }
        self.fisb.finish(now);
        if self.stats_interval.0 > 0 && now > self.series.last {
            self.sample_series(true);
        }
        let classes = self.topo.classes.iter().map(|c| c.name.clone()).collect::<Vec<_>>();
        let ct = |v: &[u64]| ClassTimes::new(&classes, v);
        let tasks: Vec<TaskResult> = self
            .tasks
            .iter()
            .enumerate()
            .map(|(i, t)| TaskResult {
                id: i as u32,
                domain: t.domain.0,
                vcpu: self.views[i].vcpu,
                name: t.name.as_deref().map(str::to_string),
                idle: t.idle_vcpu,
                completion_ns: t.done_at.map(|x| x.0),
                computes_done: t.computes_done,
                cpu_ns: ct(&t.run_by_class.to_vec()),
                wait_ns: t.wait_ns,
                blocked_ns: t.blocked_ns,
                spin_ns: t.spin_ns,
                migrations_local: t.mig_local,
                migrations_remote: t.mig_remote,
                wake_latency: t.wake_lat.clone(),
                periodic: (t.slack.periods > 0).then(|| Periodic {
                    periods: t.slack.periods,
                    deadline_misses: t.slack.misses,
                    slack_min_ns: t.slack.min,
                    slack_mean_ns: t.slack.sum.div_euclid(t.slack.periods as i64),
                    slack_max_ns: t.slack.max,
                }),
            })
            .collect();
        let domains: Vec<DomainResult> = self
            .domains
            .iter()
            .enumerate()
            .map(|(d, dv)| {
                let mine: Vec<&TaskResult> = tasks.iter().filter(|t| t.domain == d as u32 && !t.idle).collect();
                let mut run = vec![0u64; classes.len()];
                for t in &mine {
                    for (k, v) in t.cpu_ns.values.iter().enumerate() {
                        run[k] += v;
                    }
                }
                let completion = if !mine.is_empty() && mine.iter().all(|t| t.completion_ns.is_some()) {
                    mine.iter().filter_map(|t| t.completion_ns).max()
                } else {
                    None
                };
                DomainResult {
                    id: d as u32,
                    name: dv.name.clone(),
                    completion_ns: completion,
                    cpu_ns: ct(&run),
                    wait_ns: mine.iter().map(|t| t.wait_ns).sum(),
                    blocked_ns: mine.iter().map(|t| t.blocked_ns).sum(),
                    spin_ns: mine.iter().map(|t| t.spin_ns).sum(),
                    migrations_local: mine.iter().map(|t| t.migrations_local).sum(),
                    migrations_remote: mine.iter().map(|t| t.migrations_remote).sum(),
                    background: self.tasks.iter().any(|t| t.domain.0 == d as u32 && t.background),
                    series: std::mem::take(&mut self.series.points[d]),
                }
            })
            .collect();
        let cpus = self
            .cpus
            .iter()
            .enumerate()
            .map(|(i, c)| CpuResult {
                id: i as u32,
                class: classes[c.class as usize].clone(),
                busy_ns: fixed::round_ns(c.busy),
                idle_ns: fixed::round_ns(c.idle),
                noise_ns: fixed::round_ns(c.noise_t),
            })
            .collect();
        let counters = self.disp.counters().into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        // Superseded plans of a run that ended early: those keyed before its last event.
        let last = self.last_key;
        self.events_done += self.ghosts.iter().filter(|g| g.0 < last).count() as u64;
        RunResult {
            scenario: self.name.clone(),
            dispatcher: self.disp.name().to_string(),
            placer: self.placer.as_ref().map(|p| p.name().to_string()).unwrap_or_else(|| "none".into()),
            seed: self.seed,
            end_ns: now.0,
            all_done: self.live == 0,
            truncated: self.truncated && self.live > 0,
            events: self.events_done,
            classes,
            stats_interval_ns: self.stats_interval.0 * self.series.stride,
            fast_idle_slow_busy_ns: self.fisb.ns,
            placer_changes: self.placer_changes,
            dispatcher_counters: counters,
            counter_series: std::mem::take(&mut self.series.counters),
            dispatcher_samples: self.disp.samples().into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
            tasks,
            domains,
            cpus,
            engine: EngineFigures { superseded: self.superseded, queue_peak: self.events.peak as u64 },
        }
    }
}
