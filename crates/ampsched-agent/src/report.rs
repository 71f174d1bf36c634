//! The `ampsched topology` report: CPUs, classes, capacities and where each
//! figure came from, plus the effective capacity measured over a short window.

use crate::discovery::Discovered;
use crate::sampler::CpuFigures;
use serde_json::{json, Value};
use std::fmt::Write;

/// A text table.
pub fn topology_text(d: &Discovered, window: Option<(&[CpuFigures], f64)>) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "classes: {}", d.class_source);
    for (i, c) in d.topo.classes.iter().enumerate() {
        let cpus: Vec<String> = d.cpus.iter().filter(|x| x.class == i).map(|x| x.linux_id.to_string()).collect();
        let _ = writeln!(s, "  {:<6} speed {:.3}  cpus {}", c.name, c.speed, cpus.join(","));
    }
    let eff = window.is_some();
    let _ = write!(s, "{:>4} {:>4} {:<6} {:>9} {:>4} {:>4}", "cpu", "id", "class", "capacity", "llc", "numa");
    if eff {
        let _ = write!(s, " {:>9} {:>6}", "effective", "noise%");
    }
    let _ = writeln!(s, "  source");
    for (i, c) in d.cpus.iter().enumerate() {
        let _ = write!(
            s,
            "{:>4} {:>4} {:<6} {:>9.0} {:>4} {:>4}",
            c.linux_id, i, d.topo.classes[c.class].name, c.capacity, c.mem_domain, c.numa
        );
        if let Some((f, _)) = window {
            let share = f.get(i).map(|x| x.capacity_share()).unwrap_or(1.0);
            let _ = write!(s, " {:>9.0} {:>6.1}", c.capacity * share, 100.0 * (1.0 - share));
        }
        let _ = writeln!(s, "  {}", c.source);
    }
    if let Some((_, ms)) = window {
        let _ = writeln!(
            s,
            "effective = capacity × (1 − (irq + softirq + steal + real-time) share) over {ms:.0} ms (/proc/stat, RT tasks' schedstat)"
        );
    }
    s
}

/// The same as JSON (schema `ampsched.topology/1`).
pub fn topology_json(d: &Discovered, window: Option<(&[CpuFigures], f64)>) -> Value {
    json!({
        "schema": "ampsched.topology/1",
        "class_source": d.class_source,
        "classes": d.topo.classes.iter().map(|c| json!({"name": c.name, "speed": c.speed})).collect::<Vec<_>>(),
        "cpus": d.cpus.iter().enumerate().map(|(i, c)| {
            let mut v = json!({"linux_id": c.linux_id, "id": i, "class": d.topo.classes[c.class].name,
                               "capacity": c.capacity, "source": c.source, "mem_domain": c.mem_domain, "numa": c.numa});
            if let Some((f, ms)) = window {
                let x = f.get(i).copied().unwrap_or_default();
                v["effective_capacity"] = json!(c.capacity * x.capacity_share());
                v["window_ms"] = json!(ms);
                v["busy_ns"] = json!(x.busy.0);
                v["idle_ns"] = json!(x.idle.0);
                v["noise_ns"] = json!(x.noise.0);
                v["rt_ns"] = json!(x.rt.0);
            }
            v
        }).collect::<Vec<_>>(),
    })
}
