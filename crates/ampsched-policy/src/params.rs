//! Policy parameters: read from a scenario's `Params` map with defaults,
//! ranges and a clear error for unknown names.

use ampsched_model::spec::{ParamValue, Params};
use ampsched_model::Nanos;
use std::fmt;

/// One documented parameter of a policy (shown by `ampsched policies`).
#[derive(Clone, Copy, Debug)]
pub struct ParamDoc {
    /// Name as written in files.
    pub name: &'static str,
    /// Default, as text.
    pub default: &'static str,
    /// One-line description.
    pub doc: &'static str,
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

    fn get(&self, name: &str) -> Option<&ParamValue> {
        debug_assert!(self.docs.iter().any(|d| d.name == name), "{} reads undocumented {name}", self.policy);
        self.params.get(name)
    }

    /// A number in `[min, max]`.
    pub fn f64(&self, name: &str, default: f64, min: f64, max: f64) -> Result<f64, PolicyError> {
        match self.get(name) {
            None => Ok(default),
            Some(v) => match v.as_f64() {
                Some(x) if x >= min && x <= max => Ok(x),
                _ => Err(PolicyError {
                    param: name.into(),
                    msg: format!("must be a number in [{min}, {max}], got {v:?}"),
                }),
            },
        }
    }

    /// An integer in `[min, max]`.
    pub fn u64(&self, name: &str, default: u64, min: u64, max: u64) -> Result<u64, PolicyError> {
        match self.get(name) {
            None => Ok(default),
            Some(v) => match v.as_u64() {
                Some(x) if x >= min && x <= max => Ok(x),
                _ => Err(PolicyError {
                    param: name.into(),
                    msg: format!("must be an integer in [{min}, {max}], got {v:?}"),
                }),
            },
        }
    }

    /// A duration given in milliseconds, in `[min_ms, max_ms]`.
    pub fn ms(&self, name: &str, default: Nanos, min_ms: f64, max_ms: f64) -> Result<Nanos, PolicyError> {
        Ok(Nanos::from_ms_f64(self.f64(name, default.as_ms_f64(), min_ms, max_ms)?))
    }

    /// A duration given in microseconds, in `[min_us, max_us]`.
    pub fn us(&self, name: &str, default: Nanos, min_us: f64, max_us: f64) -> Result<Nanos, PolicyError> {
        Ok(Nanos::from_ms_f64(self.f64(name, default.0 as f64 / 1e3, min_us, max_us)? / 1e3))
    }

    /// A boolean.
    pub fn bool(&self, name: &str, default: bool) -> Result<bool, PolicyError> {
        match self.get(name) {
            None => Ok(default),
            Some(v) => v
                .as_bool()
                .ok_or_else(|| PolicyError { param: name.into(), msg: format!("must be true or false, got {v:?}") }),
        }
    }

    /// One of `allowed` strings.
    pub fn choice(
        &self,
        name: &str,
        default: &'static str,
        allowed: &[&'static str],
    ) -> Result<&'static str, PolicyError> {
        match self.get(name) {
            None => Ok(default),
            Some(v) => {
                let s = v.as_str().unwrap_or("");
                allowed.iter().find(|a| **a == s).copied().ok_or_else(|| PolicyError {
                    param: name.into(),
                    msg: format!("must be one of {}, got {v:?}", allowed.join(", ")),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOCS: &[ParamDoc] = &[ParamDoc { name: "tslice_ms", default: "30", doc: "slice" }];

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
        let e = r.ms("tslice_ms", Nanos::from_ms(30), 1.0, 1000.0).unwrap_err();
        assert!(e.msg.contains("[1, 1000]"), "{}", e.msg);
    }
}
