//! ampsched-lab: experiments on the simulator — experiment files (a scenario
//! plus the comparison a study makes on it), the reproductions of the
//! studies (`ampsched reproduce`), and their reports and SVG figures.
//!
//! What it may import: `ampsched-sim` (scenarios, the runner, results) and
//! `ampsched-model`. What it must never be imported by: `ampsched-sim` (the
//! simulator knows nothing of studies; this crate is a client of it, like
//! the CLI and the Python bindings). Modules: `experiment` (the bottom),
//! `report` (tables, figures, markdown/HTML; knows nothing of studies),
//! `reproduce` (imports both).

#![warn(missing_docs)]

pub mod experiment;
pub mod ledger;
pub mod report;
pub mod reproduce;
pub mod validate;
