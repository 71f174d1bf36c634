//! The reports' charts: the `ampsched-charts` crate (plotters' SVG backend),
//! the one plotting path of the project, which the Python package's
//! `ampsched.plots` draws with too. Re-exported here so the studies' analyses
//! name their charts `crate::report::svg::…`.

pub use ampsched_charts::*;
