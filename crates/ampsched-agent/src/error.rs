//! The agent's error type: what was wrong, where, and what is allowed.
//!
//! May import: the standard library only. Every other module of the agent
//! reports with it, so it sits at the bottom (the crate root re-exports it
//! as `ampsched_agent::AgentError`).

use std::fmt;

/// An agent error: what was wrong, where, and what is allowed. Nothing on the
/// machine has been changed when one is returned before the loop starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentError {
    /// The message.
    pub msg: String,
}

impl AgentError {
    /// Build from a message.
    pub fn new(msg: String) -> AgentError {
        AgentError { msg }
    }
}

impl fmt::Display for AgentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.msg)
    }
}

impl std::error::Error for AgentError {}
