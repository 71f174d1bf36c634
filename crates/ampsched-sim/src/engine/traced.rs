//! Perfetto recording hooks on `Sim` (traced runs only): the recorder lives in
//! `crate::trace`; this room feeds it CPU switches and counter samples.
//!
//! May import: `Sim`, the bottom rooms and `crate::trace`. Must never import
//! the interpreter or the placer bridge.

use super::clock::Ev;
use super::task::St;
use super::Sim;
use crate::results::RunResult;
use crate::trace::{Sample, TraceOptions, TraceRecorder, TraceSink};
use ampsched_model::{CpuId, Nanos, TaskId};

impl Sim {
    /// Run to the stop condition recording a Perfetto trace (see `trace`): the
    /// results (the same as `run`'s) and the trace bytes.
    pub fn run_traced(self, opts: TraceOptions) -> (RunResult, Vec<u8>) {
        let sink = TraceSink::default();
        let r = self.run_into(opts, sink.clone());
        (r, sink.take())
    }

    /// `run_traced` writing the trace through to `out` as the run goes (memory
    /// bounded, see `trace::STREAM_CHUNK_BYTES`): the results, and the first
    /// error writing or flushing `out`. The bytes written equal `run_traced`'s.
    pub fn run_traced_to(
        self,
        opts: TraceOptions,
        out: Box<dyn std::io::Write + Send>,
    ) -> (RunResult, std::io::Result<()>) {
        let sink = TraceSink::to_writer(out);
        let r = self.run_into(opts, sink.clone());
        (r, sink.close())
    }

    fn run_into(mut self, opts: TraceOptions, sink: TraceSink) -> RunResult {
        let n_fast = self.cpus.iter().filter(|c| c.fast).count() as u32;
        let names: Vec<Option<&str>> = self.tasks.iter().map(|t| t.name.as_deref()).collect();
        let mut tr =
            TraceRecorder::new(&self.domains, &self.views, &names, self.cpus.len(), n_fast, opts, sink.clone());
        for (i, c) in self.cpus.iter().enumerate() {
            tr.frequency(Nanos::ZERO, CpuId(i as u32), c.speed * (1.0 - c.noise));
        }
        // `run` wakes every task with work at time 0.
        for (i, t) in self.tasks.iter().enumerate() {
            if !t.idle_vcpu {
                tr.waking(Nanos::ZERO, CpuId(0), TaskId(i as u32));
            }
        }
        self.push(opts.sample_period, Ev::TraceSample);
        self.trace = Some(Box::new(tr));
        self.run()
    }

    /// A CPU switches to `t` (traced runs only).
    pub(super) fn trace_switch(&mut self, c: CpuId, t: Option<TaskId>) {
        let prev = self.cpus[c.idx()].curr;
        if prev == t {
            return;
        }
        let state = match prev.map(|p| self.tasks[p.idx()].st) {
            Some(St::Blocked) => 1,
            Some(St::Done) => 2,
            _ => 0,
        };
        if let Some(tr) = self.trace.as_deref_mut() {
            tr.switch(self.now, c, prev, state, t);
        }
    }

    /// Sample the trace's counter tracks and schedule the next sample (traced runs only).
    pub(super) fn trace_sample(&mut self) {
        let now = self.now;
        let fast = self.topo.fast_class;
        let credit: Vec<Option<i64>> = (0..self.tasks.len())
            .map(|i| if self.tasks[i].idle_vcpu { None } else { self.disp.credit(TaskId(i as u32)) })
            .collect();
        let runq: Vec<Option<u32>> = (0..self.cpus.len()).map(|c| self.disp.runq_len(CpuId(c as u32))).collect();
        let mut fast_ns = vec![0u64; self.domains.len()];
        for t in &self.tasks {
            let mut v = t.run_by_class.get(fast);
            if let St::Running(c) = t.st {
                if self.cpus[c.idx()].class as usize == fast {
                    v += (now - t.seg_start).0;
                }
            }
            fast_ns[t.domain.idx()] += v;
        }
        let counters = self.disp.counters();
        let sample = Sample {
            credit: &credit,
            runq: &runq,
            fast_ns: &fast_ns,
            active: &self.series.active,
            counters: &counters,
            placer_changes: self.placer_changes,
        };
        let Some(tr) = self.trace.as_deref_mut() else { return };
        tr.sample(now, &sample);
        let p = tr.period();
        self.push(now + p, Ev::TraceSample);
    }
}
