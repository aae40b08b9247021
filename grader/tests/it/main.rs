//! The grader's one integration-test binary.

mod detectors;
mod ingest;
mod pipeline;
mod sandbox;
