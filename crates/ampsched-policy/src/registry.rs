//! Names → policies. The one place that lists every dispatcher and placer,
//! with their parameters (shown by `ampsched policies`).

use crate::credit::{Credit, CreditParams, Profile, CREDIT_PARAMS};
use crate::dispatcher::Dispatcher;
use crate::noop::NoPlacer;
use crate::params::{Kind, ParamDoc, ParamReader, PolicyError};
use crate::placer::Placer;
use ampsched_model::spec::Params;
use ampsched_model::{Nanos, Topology};

/// A registered policy and its parameters.
#[derive(Clone, Copy, Debug)]
pub struct PolicyInfo {
    /// Name used in files and on the command line.
    pub name: &'static str,
    /// One-line description.
    pub doc: &'static str,
    /// Its parameters.
    pub params: &'static [ParamDoc],
    /// Parameters set differently on a real machine (placers only; see `placer_bridge`).
    pub real_machine: &'static [crate::placer::RealMachineParam],
}

/// Every dispatcher.
pub const DISPATCHERS: &[PolicyInfo] = &[
    PolicyInfo {
        name: "credit",
        doc: "Xen credit scheduler (credit1), current rules: the baseline",
        params: CREDIT_PARAMS,
        real_machine: &[],
    },
    PolicyInfo {
        name: "xen40",
        doc: "Xen credit scheduler as in Xen 4.0 (the seed papers' version)",
        params: CREDIT_PARAMS,
        real_machine: &[],
    },
    PolicyInfo {
        name: "aash",
        doc:
            "AASH (VEE'10): credit + fast/slow credits, fast-queue rotation, fast never idle, aware guests, priorities",
        params: crate::aash::AASH_PARAMS,
        real_machine: &[],
    },
    PolicyInfo {
        name: "fair",
        doc: "CFS-like fair dispatcher with a runqueue-length balancer: the asymmetry-unaware OS",
        params: crate::fair::FAIR_PARAMS,
        real_machine: &[],
    },
    PolicyInfo {
        name: "linux",
        doc: "today's Linux fair class: EEVDF, PELT, capacity-aware placement and balancing, RT class above",
        params: crate::linux::LINUX_PARAMS,
        real_machine: &[],
    },
    PolicyInfo {
        name: "cs",
        doc: "hybrid co-scheduling (VEE'09): credit + a CON vCPU's pick signals all pCPUs, one co-scheduled domain",
        params: crate::cosched::COSCHED_PARAMS,
        real_machine: &[],
    },
    PolicyInfo {
        name: "cds",
        doc: "co-descheduling: cs + descheduling a CON vCPU deschedules its running siblings",
        params: crate::cosched::COSCHED_PARAMS,
        real_machine: &[],
    },
    PolicyInfo {
        name: "pcs",
        doc: "partial co-scheduling: credit + signal only the pCPUs holding the CON domain's vCPUs",
        params: crate::cosched::COSCHED_PARAMS,
        real_machine: &[],
    },
    PolicyInfo {
        name: "bcs",
        doc: "boost co-scheduling: credit + a CON vCPU's pick raises its active siblings to COS (no signal)",
        params: crate::cosched::COSCHED_PARAMS,
        real_machine: &[],
    },
    PolicyInfo {
        name: "aash+pcs",
        doc: "AASH placement + partial co-scheduling + gang rotation of the fast grant (equal fast exposure in a gang)",
        params: crate::aash_cosched::AASH_COSCHED_PARAMS,
        real_machine: &[],
    },
    PolicyInfo {
        name: "aash+bcs",
        doc: "AASH placement + boost co-scheduling + gang rotation of the fast grant (equal fast exposure in a gang)",
        params: crate::aash_cosched::AASH_COSCHED_PARAMS,
        real_machine: &[],
    },
];

/// Default placer period: 30 ms, one credit accounting period.
pub const DEFAULT_PLACER_PERIOD: Nanos = Nanos::from_ms(30);

/// `period_ms` of the `none` placer.
const NONE_PERIOD: ParamDoc = ParamDoc {
    name: "period_ms",
    kind: Kind::Ms { default: DEFAULT_PLACER_PERIOD, min: 1.0, max: 60_000.0 },
    unit: "ms",
    doc: "sampling period",
};
const NONE_PARAMS: &[ParamDoc] = &[NONE_PERIOD];

/// Every placer.
pub const PLACERS: &[PolicyInfo] = &[
    PolicyInfo { name: "none", doc: "no placement: affinities never change", params: NONE_PARAMS, real_machine: &[] },
    PolicyInfo {
        name: "aash",
        doc: "AASH fast-core rotation as affinity masks (fair share, aware guests, priorities, fast never idle)",
        params: crate::aash_placer::AASH_PLACER_PARAMS,
        real_machine: crate::aash_placer::AASH_PLACER_REAL_MACHINE,
    },
    PolicyInfo {
        name: "capability",
        doc: "capability balancer (ECPT swaps, Kim et al. 2012)",
        params: crate::capability::CAPABILITY_PARAMS,
        real_machine: &[],
    },
    PolicyInfo {
        name: "fast-first",
        doc: "fast CPUs never idle while slower ones have work (ISCA'05 kernel fix)",
        params: crate::fastfirst::FAST_FIRST_PARAMS,
        real_machine: &[],
    },
];

fn unknown(kind: &str, name: &str, known: &[PolicyInfo]) -> PolicyError {
    let names: Vec<_> = known.iter().map(|p| p.name).collect();
    PolicyError { param: String::new(), msg: format!("unknown {kind} `{name}`; known: {}", names.join(", ")) }
}

/// Build a dispatcher by name.
pub fn dispatcher_by_name(name: &str, params: &Params, topo: &Topology) -> Result<Box<dyn Dispatcher>, PolicyError> {
    match name {
        "credit" => {
            let p = CreditParams::from_params(name, Profile::Current, params, CREDIT_PARAMS)?;
            Ok(Box::new(Credit::new("credit", p, topo)))
        }
        "xen40" => {
            let p = CreditParams::from_params(name, Profile::Xen40, params, CREDIT_PARAMS)?;
            Ok(Box::new(Credit::new("xen40", p, topo)))
        }
        "fair" => Ok(Box::new(crate::fair::Fair::new(crate::fair::FairParams::from_params(name, params)?, topo))),
        "linux" => {
            Ok(Box::new(crate::linux::Linux::new(crate::linux::LinuxParams::from_params(name, params, topo)?, topo)))
        }
        "aash" => Ok(Box::new(crate::aash::Aash::new(crate::aash::AashParams::from_params(name, params, topo)?, topo))),
        "cs" | "cds" | "pcs" | "bcs" => {
            use crate::cosched::CoSched;
            let p = crate::cosched::credit_params(name, params)?;
            let c = crate::cosched::signal_cost(name, params)?;
            Ok(match name {
                "cs" => Box::new(
                    CoSched::new("cs", crate::cs::Cs::default(), Credit::new("cs", p, topo)).with_signal_cost(c),
                ),
                "cds" => Box::new(
                    CoSched::new("cds", crate::cds::Cds::default(), Credit::new("cds", p, topo)).with_signal_cost(c),
                ),
                "pcs" => Box::new(
                    CoSched::new("pcs", crate::pcs::Pcs::default(), Credit::new("pcs", p, topo)).with_signal_cost(c),
                ),
                _ => Box::new(CoSched::new("bcs", crate::bcs::Bcs::default(), Credit::new("bcs", p, topo))),
            })
        }
        "aash+pcs" | "aash+bcs" => {
            use crate::aash_cosched::AashGang;
            use crate::cosched::CoSched;
            let base = AashGang::from_params(name, params, topo)?;
            let c = crate::aash_cosched::signal_cost(name, params)?;
            Ok(if name == "aash+pcs" {
                Box::new(CoSched::new("aash+pcs", crate::pcs::Pcs::default(), base).with_signal_cost(c))
            } else {
                Box::new(CoSched::new("aash+bcs", crate::bcs::Bcs::default(), base))
            })
        }
        _ => Err(unknown("dispatcher", name, DISPATCHERS)),
    }
}

/// Build a placer by name.
pub fn placer_by_name(name: &str, params: &Params, _topo: &Topology) -> Result<Box<dyn Placer>, PolicyError> {
    match name {
        "none" => {
            let r = ParamReader::new(name, params, NONE_PARAMS)?;
            Ok(Box::new(NoPlacer::new(r.duration(&NONE_PERIOD)?)))
        }
        "capability" => {
            let p = crate::capability::CapabilityParams::from_params(name, params)?;
            Ok(Box::new(crate::capability::Capability::new(p, _topo)))
        }
        "fast-first" => Ok(Box::new(crate::fastfirst::FastFirst::from_params(name, params)?)),
        "aash" => Ok(Box::new(crate::aash_placer::AashPlacer::from_params(name, params, _topo)?)),
        _ => Err(unknown("placer", name, PLACERS)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_names_list_the_known_ones() {
        let topo = Topology::fast_slow(1, 2.0, 3, 1.0, 4);
        let e = dispatcher_by_name("cfs", &Params::new(), &topo).err().unwrap();
        assert!(e.msg.contains("known: credit, xen40"), "{}", e.msg);
        let e = placer_by_name("magic", &Params::new(), &topo).err().unwrap();
        assert!(e.msg.contains("known: none"), "{}", e.msg);
    }

    /// Every registered policy's table: unique names, a unit that matches a
    /// duration's type, a default inside its range, a doc.
    #[test]
    fn every_declaration_is_consistent() {
        for p in DISPATCHERS.iter().chain(PLACERS) {
            for (i, d) in p.params.iter().enumerate() {
                assert!(!p.params[..i].iter().any(|e| e.name == d.name), "{}: {} twice", p.name, d.name);
                assert!(!d.doc.is_empty(), "{}: {} has no doc", p.name, d.name);
                match d.kind {
                    Kind::Ms { default, min, max } => {
                        assert_eq!(d.unit, "ms", "{}", d.name);
                        assert!(
                            (min..=max).contains(&default.as_ms_f64()),
                            "{}: {} default out of range",
                            p.name,
                            d.name
                        );
                    }
                    Kind::Us { default, min, max } => {
                        assert_eq!(d.unit, "µs", "{}", d.name);
                        assert!(
                            (min..=max).contains(&(default.0 as f64 / 1e3)),
                            "{}: {} default out of range",
                            p.name,
                            d.name
                        );
                    }
                    Kind::Num { default, min, max } => assert!((min..=max).contains(&default), "{}", d.name),
                    Kind::Int { default, min, max } => assert!((min..=max).contains(&default), "{}", d.name),
                    Kind::Choice { default, allowed } => assert!(allowed.contains(&default), "{}", d.name),
                    Kind::Bool { .. } | Kind::CpuList { .. } => {}
                }
            }
        }
    }
}
