//! One module per area of the site.
pub mod auth;
pub mod admin;
pub mod library;
pub mod assignments;
pub mod candidate;
pub mod review;
pub mod queue;
pub mod inbox;
pub mod transcript;
