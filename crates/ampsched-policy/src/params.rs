//! Policy parameters: each policy declares its tunables once, in one table
//! of [`ParamDoc`]s (name, type with default and range, unit, doc); the
//! reader takes defaults and ranges from that declaration, and `ampsched
//! policies` prints it. Unknown names are a clear error.

use ampsched_model::spec::{ParamValue, Params};
use ampsched_model::Nanos;
use std::fmt;

/// A parameter's type, with its default and allowed range.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    /// A duration written in milliseconds, read as [`Nanos`]; range in ms.
    Ms {
        /// Default.
        default: Nanos,
        /// Smallest allowed, ms.
        min: f64,
        /// Largest allowed, ms.
        max: f64,
    },
    /// A duration written in microseconds, read as [`Nanos`]; range in µs.
    Us {
        /// Default.
        default: Nanos,
        /// Smallest allowed, µs.
        min: f64,
        /// Largest allowed, µs.
        max: f64,
    },
    /// A number in a range.
    Num {
        /// Default.
        default: f64,
        /// Smallest allowed.
        min: f64,
        /// Largest allowed.
        max: f64,
    },
    /// An integer in a range.
    Int {
        /// Default.
        default: u64,
        /// Smallest allowed.
        min: u64,
        /// Largest allowed.
        max: u64,
    },
    /// `true` or `false`.
    Bool {
        /// Default.
        default: bool,
    },
    /// One of a few words.
    Choice {
        /// Default.
        default: &'static str,
        /// The allowed words.
        allowed: &'static [&'static str],
    },
    /// A CPU list such as `"0-1,4"`, read by the policy itself.
    CpuList {
        /// What applies when it is not given (text).
        default: &'static str,
    },
}

/// One tunable of a policy, declared once: what files write, its type,
/// default and range, unit and doc. Read with [`ParamReader`]; shown by
/// `ampsched policies`.
#[derive(Clone, Copy, Debug)]
pub struct ParamDoc {
    /// Name as written in files.
    pub name: &'static str,
    /// Type, default and range.
    pub kind: Kind,
    /// Unit of the written value (`ms`, `µs`, `%`, … or empty).
    pub unit: &'static str,
    /// One-line description.
    pub doc: &'static str,
}

impl ParamDoc {
    /// The type as shown to users.
    pub fn type_name(&self) -> String {
        match self.kind {
            Kind::Ms { .. } | Kind::Us { .. } | Kind::Num { .. } => "number".into(),
            Kind::Int { .. } => "integer".into(),
            Kind::Bool { .. } => "bool".into(),
            Kind::Choice { allowed, .. } => allowed.join("|"),
            Kind::CpuList { .. } => "cpu list".into(),
        }
    }

    /// The default as written in files.
    pub fn default_text(&self) -> String {
        match self.kind {
            Kind::Ms { default, .. } => format!("{}", default.as_ms_f64()),
            Kind::Us { default, .. } => format!("{}", default.0 as f64 / 1e3),
            Kind::Num { default, .. } => format!("{default}"),
            Kind::Int { default, .. } => format!("{default}"),
            Kind::Bool { default } => format!("{default}"),
            Kind::Choice { default, .. } | Kind::CpuList { default } => default.into(),
        }
    }

    /// The allowed range as text (empty when the type says it all).
    pub fn range_text(&self) -> String {
        match self.kind {
            Kind::Ms { min, max, .. } | Kind::Us { min, max, .. } | Kind::Num { min, max, .. } => {
                format!("{min}..{max}")
            }
            Kind::Int { min, max, .. } => format!("{min}..{max}"),
            _ => String::new(),
        }
    }

    /// The default of a `Bool` parameter.
    pub const fn default_bool(&self) -> bool {
        match self.kind {
            Kind::Bool { default } => default,
            _ => panic!("not a bool parameter"),
        }
    }

    /// The default of an `Ms` or `Us` parameter.
    pub const fn default_nanos(&self) -> Nanos {
        match self.kind {
            Kind::Ms { default, .. } | Kind::Us { default, .. } => default,
            _ => panic!("not a duration parameter"),
        }
    }

    /// The default of an `Int` parameter.
    pub const fn default_int(&self) -> u64 {
        match self.kind {
            Kind::Int { default, .. } => default,
            _ => panic!("not an integer parameter"),
        }
    }

    /// The default of a `Choice` parameter.
    pub const fn default_choice(&self) -> &'static str {
        match self.kind {
            Kind::Choice { default, .. } => default,
            _ => panic!("not a choice parameter"),
        }
    }
}

/// An error choosing or configuring a policy.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicyError {
    /// Parameter name (empty when the policy name itself is wrong).
    pub param: String,
    /// What is wrong and what is allowed.
    pub msg: String,
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.param.is_empty() {
            write!(f, "{}", self.msg)
        } else {
            write!(f, "parameter `{}`: {}", self.param, self.msg)
        }
    }
}

impl std::error::Error for PolicyError {}

/// Reads typed parameters and rejects unknown ones.
pub struct ParamReader<'a> {
    params: &'a Params,
    docs: &'static [ParamDoc],
    policy: &'a str,
}

impl<'a> ParamReader<'a> {
    /// Start reading `params` for `policy`, whose parameters are `docs`.
    pub fn new(policy: &'a str, params: &'a Params, docs: &'static [ParamDoc]) -> Result<Self, PolicyError> {
        for k in params.keys() {
            if !docs.iter().any(|d| d.name == k) {
                let known: Vec<_> = docs.iter().map(|d| d.name).collect();
                return Err(PolicyError {
                    param: k.clone(),
                    msg: format!(
                        "unknown parameter of policy `{policy}`; known: {}",
                        if known.is_empty() { "(none)".to_string() } else { known.join(", ") }
                    ),
                });
            }
        }
        Ok(ParamReader { params, docs, policy })
    }

    fn get(&self, p: &ParamDoc) -> Option<&ParamValue> {
        debug_assert!(self.docs.iter().any(|d| d.name == p.name), "{} reads undeclared {}", self.policy, p.name);
        self.params.get(p.name)
    }

    /// Whether `p` is given (not defaulted).
    pub fn is_set(&self, p: &ParamDoc) -> bool {
        self.get(p).is_some()
    }

    fn number(&self, p: &ParamDoc, default: f64, min: f64, max: f64) -> Result<f64, PolicyError> {
        match self.get(p) {
            None => Ok(default),
            Some(v) => match v.as_f64() {
                Some(x) if x >= min && x <= max => Ok(x),
                _ => Err(PolicyError {
                    param: p.name.into(),
                    msg: format!("must be a number in [{min}, {max}], got {v}"),
                }),
            },
        }
    }

    /// A `Num` parameter.
    pub fn num(&self, p: &ParamDoc) -> Result<f64, PolicyError> {
        match p.kind {
            Kind::Num { default, min, max } => self.number(p, default, min, max),
            _ => panic!("{} is not a number parameter", p.name),
        }
    }

    /// An `Int` parameter.
    pub fn int(&self, p: &ParamDoc) -> Result<u64, PolicyError> {
        let Kind::Int { default, min, max } = p.kind else { panic!("{} is not an integer parameter", p.name) };
        match self.get(p) {
            None => Ok(default),
            Some(v) => match v.as_u64() {
                Some(x) if x >= min && x <= max => Ok(x),
                _ => Err(PolicyError {
                    param: p.name.into(),
                    msg: format!("must be an integer in [{min}, {max}], got {v}"),
                }),
            },
        }
    }

    /// An `Ms` (milliseconds) or `Us` (microseconds) parameter, as a duration.
    pub fn duration(&self, p: &ParamDoc) -> Result<Nanos, PolicyError> {
        match p.kind {
            Kind::Ms { default, min, max } => Ok(Nanos::from_ms_f64(self.number(p, default.as_ms_f64(), min, max)?)),
            Kind::Us { default, min, max } => {
                Ok(Nanos::from_ms_f64(self.number(p, default.0 as f64 / 1e3, min, max)? / 1e3))
            }
            _ => panic!("{} is not a duration parameter", p.name),
        }
    }

    /// A `Bool` parameter.
    pub fn bool(&self, p: &ParamDoc) -> Result<bool, PolicyError> {
        let default = p.default_bool();
        match self.get(p) {
            None => Ok(default),
            Some(v) => v
                .as_bool()
                .ok_or_else(|| PolicyError { param: p.name.into(), msg: format!("must be true or false, got {v}") }),
        }
    }

    /// A `Choice` parameter: one of its allowed words.
    pub fn choice(&self, p: &ParamDoc) -> Result<&'static str, PolicyError> {
        let Kind::Choice { default, allowed } = p.kind else { panic!("{} is not a choice parameter", p.name) };
        match self.get(p) {
            None => Ok(default),
            Some(v) => {
                let s = v.as_str().unwrap_or("");
                allowed.iter().find(|a| **a == s).copied().ok_or_else(|| PolicyError {
                    param: p.name.into(),
                    msg: format!("must be one of {}, got {v}", allowed.join(", ")),
                })
            }
        }
    }

    /// The raw value of a `CpuList` parameter, if given (the policy parses it).
    pub fn cpu_list(&self, p: &ParamDoc) -> Option<&ParamValue> {
        debug_assert!(matches!(p.kind, Kind::CpuList { .. }), "{} is not a cpu-list parameter", p.name);
        self.get(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TSLICE: ParamDoc = ParamDoc {
        name: "tslice_ms",
        kind: Kind::Ms { default: Nanos::from_ms(30), min: 1.0, max: 1000.0 },
        unit: "ms",
        doc: "slice",
    };
    const DOCS: &[ParamDoc] = &[TSLICE];

    #[test]
    fn unknown_and_out_of_range_parameters_are_named() {
        let mut p = Params::new();
        p.insert("tslice".into(), ParamValue::Int(3));
        let e = ParamReader::new("credit", &p, DOCS).err().unwrap();
        assert_eq!(e.param, "tslice");
        assert!(e.msg.contains("known: tslice_ms"), "{}", e.msg);

        let mut p = Params::new();
        p.insert("tslice_ms".into(), ParamValue::Int(5000));
        let r = ParamReader::new("credit", &p, DOCS).unwrap();
        let e = r.duration(&TSLICE).unwrap_err();
        assert!(e.msg.contains("[1, 1000]"), "{}", e.msg);
    }

    #[test]
    fn defaults_and_ranges_come_from_the_declaration() {
        // Absent: the declared 30 ms; given as 7.5 (ms): 7 500 000 ns.
        let none = Params::new();
        let r = ParamReader::new("credit", &none, DOCS).unwrap();
        assert_eq!(r.duration(&TSLICE).unwrap(), Nanos::from_ms(30));
        let mut p = Params::new();
        p.insert("tslice_ms".into(), ParamValue::Float(7.5));
        let r = ParamReader::new("credit", &p, DOCS).unwrap();
        assert_eq!(r.duration(&TSLICE).unwrap(), Nanos(7_500_000));
        assert_eq!((TSLICE.type_name().as_str(), TSLICE.default_text().as_str()), ("number", "30"));
        assert_eq!(TSLICE.range_text(), "1..1000");
    }
}
