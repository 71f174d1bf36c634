//! Running simulations of scenarios: one (optionally traced), or several in
//! parallel on all cores with results in order.
//!
//! May import: the engine, scenario loading, results and the trace
//! recorder's options. Must never import anything in `ampsched-lab` (which
//! calls this module) and is imported by no module of the engine.

use crate::engine::Sim;
use crate::results::RunResult;
use crate::scenario::{Scenario, ScenarioError};
use crate::trace::TraceOptions;
use ampsched_model::spec::PolicySpec;
use rayon::prelude::*;
use std::sync::atomic::{AtomicUsize, Ordering};

/// One run to do: a scenario, a seed and optional policy overrides.
#[derive(Clone)]
pub struct Job<'a> {
    /// The scenario.
    pub scenario: &'a Scenario,
    /// The seed.
    pub seed: u64,
    /// Dispatcher override.
    pub dispatcher: Option<PolicySpec>,
    /// Placer override.
    pub placer: Option<PolicySpec>,
}

/// Run one job.
pub fn run_one(job: &Job) -> Result<RunResult, ScenarioError> {
    let cfg = job.scenario.config(job.seed, job.dispatcher.as_ref(), job.placer.as_ref())?;
    Ok(Sim::new(cfg).run())
}

/// Run one job, calling `progress(now, end)` (simulated time) every
/// 65 536 events: a long single run's progress bar.
pub fn run_watched(
    job: &Job,
    progress: impl FnMut(ampsched_model::Nanos, ampsched_model::Nanos) + Send + 'static,
) -> Result<RunResult, ScenarioError> {
    let cfg = job.scenario.config(job.seed, job.dispatcher.as_ref(), job.placer.as_ref())?;
    Ok(Sim::new(cfg).with_progress(progress).run())
}

/// Run jobs on `threads` worker threads (0 = all cores) of a rayon pool;
/// `progress(done, total)` is called after each job. Results come back in
/// job order (rayon's indexed `collect`).
///
/// Every job is a task of its own that an idle worker can steal
/// (`with_max_len(1)`): left to itself, rayon splits the list only about
/// log2(workers) + 1 times before a worker runs a range in sequence, so on
/// 2 cores a worker ran up to a quarter of a study alone while the other
/// had run dry (`reproduce capability` on an idle 2-core machine: 36.9 s
/// wall for 58 s of CPU time, 30.1 s with one task per job); now the tail
/// is at most the longest single run.
pub fn run_all<F>(jobs: &[Job], threads: usize, progress: F) -> Vec<Result<RunResult, ScenarioError>>
where
    F: Fn(usize, usize) + Sync,
{
    let n = jobs.len();
    let done = AtomicUsize::new(0);
    let run = || {
        jobs.par_iter()
            .with_max_len(1)
            .map(|j| {
                let r = run_one(j);
                progress(done.fetch_add(1, Ordering::SeqCst) + 1, n);
                r
            })
            .collect()
    };
    // num_threads(0) is rayon's default: one thread per core.
    match rayon::ThreadPoolBuilder::new().num_threads(threads).build() {
        Ok(pool) => pool.install(run),
        Err(_) => run(), // no new threads to be had: the global pool
    }
}

/// Run one job with a trace: its results (equal to an untraced run's) and the trace bytes.
pub fn run_traced(job: &Job, opts: TraceOptions) -> Result<(RunResult, Vec<u8>), ScenarioError> {
    Ok(traced_sim(job, opts)?.run_traced(opts))
}

/// Run one job writing its trace through to `out` as it goes (memory bounded
/// whatever the duration; the same bytes as `run_traced`): its results, and
/// the first error writing `out`.
pub fn run_traced_to(
    job: &Job,
    opts: TraceOptions,
    out: Box<dyn std::io::Write + Send>,
) -> Result<(RunResult, std::io::Result<()>), ScenarioError> {
    Ok(traced_sim(job, opts)?.run_traced_to(opts, out))
}

fn traced_sim(job: &Job, opts: TraceOptions) -> Result<Sim, ScenarioError> {
    if opts.sample_period.0 == 0 {
        return Err(ScenarioError::plain(&job.scenario.file, "", "the trace sampling period must be > 0".into()));
    }
    let cfg = job.scenario.config(job.seed, job.dispatcher.as_ref(), job.placer.as_ref())?;
    Ok(Sim::new(cfg))
}
