//! Errors raised while building model values from specs.

use thiserror::Error;

/// A problem with a model value; `path` names the offending field (e.g. `machine.cpus[2].speed`).
#[derive(Debug, Clone, Error, PartialEq)]
#[error("{path}: {msg}")]
pub struct ModelError {
    /// Dotted path of the field that is wrong.
    pub path: String,
    /// What is wrong and what is allowed.
    pub msg: String,
}

impl ModelError {
    /// Build an error for a field path.
    pub fn new(path: impl Into<String>, msg: impl Into<String>) -> ModelError {
        ModelError { path: path.into(), msg: msg.into() }
    }
}
