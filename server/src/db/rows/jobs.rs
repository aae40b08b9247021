//! The rows of `jobs` as both backends read them (sqlx's `FromRow` is
//! generic over the database), and their conversion to the area's types.

use app::contract::{JobKind, JobState};
use sqlx::FromRow;

use crate::db::jobs::*;

#[derive(FromRow)]
pub(crate) struct JobDb {
    pub(crate) id: i64,
    #[sqlx(try_from = "String")]
    pub(crate) kind: JobKind,
    pub(crate) subject: String,
    #[sqlx(try_from = "String")]
    pub(crate) state: JobState,
    pub(crate) attempts: i64,
    pub(crate) max_attempts: i64,
    pub(crate) priority: i64,
    pub(crate) lease_owner: Option<String>,
    pub(crate) lease_until: Option<i64>,
    pub(crate) last_error: Option<String>,
    pub(crate) created_at: i64,
    pub(crate) finished_at: Option<i64>,
}

impl From<JobDb> for Job {
    fn from(r: JobDb) -> Job {
        Job {
            id: r.id,
            kind: r.kind,
            subject: r.subject,
            state: r.state,
            attempts: r.attempts,
            max_attempts: r.max_attempts,
            priority: r.priority,
            lease_owner: r.lease_owner,
            lease_until: r.lease_until,
            last_error: r.last_error,
            created_at: r.created_at,
            finished_at: r.finished_at,
        }
    }
}

pub(crate) const COLS: &str = "id, kind, subject, state, attempts, max_attempts, priority, lease_owner, lease_until, last_error, created_at, finished_at";
