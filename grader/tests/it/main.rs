//! The grader's one integration-test binary.

mod ingest;
mod sandbox;
