//! Accounts, sessions, CSRF and sign-in rate limits.

pub mod password;
