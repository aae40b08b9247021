//! One module per area of the site.
pub mod admin;
pub mod assignments;
pub mod ats;
pub mod auth;
pub mod candidate;
pub mod compare;
pub mod inbox;
pub mod library;
pub mod queue;
pub mod retention;
pub mod review;
pub mod transcript;
pub mod webhooks;
