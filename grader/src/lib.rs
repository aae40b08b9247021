//! The Gatehouse grader: packets, safe ingestion, a sandbox, checks, rubric
//! scoring and receipts. This crate knows nothing of the web, the database or
//! the UI.

pub mod audit;
pub mod bytecode;
pub mod canary;
pub mod check;
pub mod clock;
pub mod detect;
pub mod diff;
pub mod env;
pub mod evidence;
pub mod grade;
pub mod guard;
pub mod hidden_text;
pub mod ingest;
pub mod lang_go;
pub mod lang_node;
pub mod lint;
pub mod manifest;
pub mod packet;
pub mod par;
pub mod pattern;
pub mod pytest;
pub mod root;
pub mod run;
pub mod runtime;
pub mod sandbox;
pub mod score;
pub mod starter;
pub mod tamper;
pub mod tree;
pub mod trusted;
pub mod witness;
pub mod witness_run;
pub mod workdir;
