//! The Linux agent's body around a placer in the simulator (a scenario's
//! `[agent]`, `engine/place.rs`): the placer's masks go in force only under
//! contention for the fast CPUs, and a fast CPU going idle while a task is
//! kept from it is reacted to after the agent's measured delay
//! (`ampsched_policy::gate`, the agent's own code).
//!
//! The worked example: CPU 0 fast (speed 1), CPU 1 slow (speed 0.5), the
//! `linux` dispatcher; task 0 computes 50 ms, task 1 100 ms (of speed-1.0
//! work); a placer that always asks for task 1 on the slow CPU (every 30 ms).
//! At t = 0 the two wake on the two idle CPUs (task 0 on CPU 0, task 1 on
//! CPU 1). At 30 ms both are runnable and CPU 0 never idled: 2 contenders
//! for 1 fast CPU, contended, so task 1 is confined to {1} (it is there
//! already). At 50 ms task 0 ends and CPU 0 goes idle while task 1 is kept
//! from it:
//! - the agent's body reacts `reaction_us` later: task 1 is moved onto CPU 0
//!   and widened. It ran 50 ms + reaction on the slow CPU (25 ms of work
//!   plus reaction / 2) and does the rest on the fast one;
//! - the placer applied as decided (no `[agent]`) keeps task 1 on {1}: all
//!   100 ms of work at half speed, 200 ms on the slow CPU.

use ampsched_model::{CpuSet, Nanos, TaskId, Topology};
use ampsched_policy::{AffinityChange, Placer, Snapshot};
use ampsched_sim::{Library, RunResult, Scenario, Sim};

/// Asks for task 1 on CPU 1 every 30 ms.
struct PinOneToSlow;

impl Placer for PinOneToSlow {
    fn name(&self) -> &'static str {
        "pin-one-to-slow"
    }
    fn period(&self) -> Nanos {
        Nanos::from_ms(30)
    }
    fn place(&mut self, _topo: &Topology, _snap: &Snapshot, out: &mut Vec<AffinityChange>) {
        out.push(AffinityChange { task: TaskId(1), mask: CpuSet::single(ampsched_model::CpuId(1)) });
    }
}

fn scenario(agent: &str) -> Scenario {
    let text = format!(
        r#"
seed = 1
[machine]
classes = [{{ name = "fast", speed = 1.0 }}, {{ name = "slow", speed = 0.5 }}]
cpus = [{{ class = "fast", count = 1 }}, {{ class = "slow", count = 1 }}]
[dispatcher]
name = "linux"
{agent}
[[domain]]
name = "w"
vcpus = 2
tasks = [{{ program = [{{ compute = {{ ms = 50.0 }} }}] }}, {{ program = [{{ compute = {{ ms = 100.0 }} }}] }}]
"#
    );
    Scenario::parse(&text, "agent_body.rs", "agent-body", &Library::builtin()).unwrap_or_else(|e| panic!("{e}"))
}

fn run(agent: &str) -> RunResult {
    let mut cfg = scenario(agent).config(1, None, None).unwrap();
    cfg.placer = Some(Box::new(PinOneToSlow));
    Sim::new(cfg).run()
}

/// Task `t`'s run time on class `class`, ns.
fn on(r: &RunResult, t: usize, class: &str) -> u64 {
    let c = &r.tasks[t].cpu_ns;
    c.names.iter().zip(&c.values).find(|(n, _)| *n == class).map_or(0, |(_, v)| *v)
}

#[test]
fn an_idle_fast_cpu_takes_the_confined_task_after_the_agents_reaction() {
    for (key, reaction_ns) in
        [("[agent]\nreaction_us = 0", 0), ("[agent]", 88_000), ("[agent]\nreaction_us = 2000", 2_000_000)]
    {
        let r = run(key);
        assert!(r.all_done, "{key}");
        // Task 0 ran its 50 ms on the fast CPU; task 1 ran on the slow CPU until the reaction.
        assert_eq!(on(&r, 0, "fast"), 50_000_000, "{key}");
        assert_eq!(on(&r, 1, "slow"), 50_000_000 + reaction_ns, "{key}");
        // What was left of its work (100 ms − (50 ms + reaction) / 2) ran on the fast CPU.
        let left = 100_000_000 - (50_000_000 + reaction_ns) / 2;
        assert!(on(&r, 1, "fast") >= left, "{key}: {} < {left}", on(&r, 1, "fast"));
        // Changes in force: the pin at 30 ms, then the move ({0}) and the widening.
        assert_eq!(r.placer_changes, 3, "{key}");
    }
}

#[test]
fn the_placer_applied_as_decided_keeps_the_task_on_the_slow_cpu() {
    let r = run("");
    assert!(r.all_done);
    // Pinned at 30 ms and never released: 100 ms of work at speed 0.5.
    assert_eq!(on(&r, 1, "slow"), 200_000_000);
    assert_eq!(on(&r, 1, "fast"), 0);
    assert_eq!(r.placer_changes, 1);
}

#[test]
fn agent_keys_are_checked() {
    for (key, want) in [
        ("[agent]\nreaction_us = -1.0", "`reaction_us` = -1 is out of range"),
        ("[agent]\nreaction_us = 2e6", "out of range"),
        ("[agent]\nbackof = false", "unknown field `backof`"),
    ] {
        let text = format!(
            "[machine]\nclasses = [{{ name = \"a\", speed = 1.0 }}]\ncpus = [{{ class = \"a\", count = 2 }}]\n{key}\n\
             [[domain]]\nname = \"w\"\nvcpus = 1\ntasks = [{{ program = [{{ compute = {{ ms = 1.0 }} }}] }}]\n"
        );
        let e = Scenario::parse(&text, "bad.toml", "bad", &Library::builtin()).unwrap_err().to_string();
        assert!(e.contains("bad.toml") && e.contains(want), "{key}: {e}");
    }
    // The defaults: the measured reaction, the back-off on.
    let sc = scenario("[agent]");
    let a = sc.agent.unwrap();
    assert_eq!((a.reaction, a.backoff), (Nanos(88_000), true));
    assert!(scenario("").agent.is_none());
}
