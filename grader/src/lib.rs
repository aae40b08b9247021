//! The Gatehouse grader: packets, safe ingestion, a sandbox, checks, rubric
//! scoring and receipts. This crate knows nothing of the web, the database or
//! the UI.

pub mod ingest;
pub mod sandbox;
