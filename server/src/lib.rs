//! The Gatehouse server: command line, web platform, database, grading queue.
//!
//! The grading itself is the `grader` crate's; this crate stores, schedules
//! and serves. Blocking grader calls run on `spawn_blocking` threads.

pub mod assignment;
pub mod ats;
pub mod audit;
pub mod auth;
pub mod backup;
pub mod blobs;
pub mod cli;
pub mod config;
pub mod db;
pub mod erasure;
pub mod error;
pub mod export;
pub mod grading;
pub mod invites;
pub mod library;
pub mod lowly;
pub mod mail;
pub mod meter;
pub mod meter_cache;
pub mod oidc;
pub mod provenance;
pub mod queue;
pub mod routes;
pub mod serve;
pub mod similarity;
pub mod state;
pub mod sweep;
pub mod text;
pub mod times;
pub mod transcript;
pub mod web;
pub mod webhooks;

/// Milliseconds since the Unix epoch, the unit of every stored time.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
