//! Workload model library (being written).
