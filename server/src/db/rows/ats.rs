//! The rows of `ats_connections` as both backends read them.

use sqlx::FromRow;

use crate::db::ResultsRelease;
use crate::db::ats::AtsConnection;

#[derive(FromRow)]
pub(crate) struct AtsConnectionRow {
    pub(crate) id: i64,
    pub(crate) name: String,
    pub(crate) results: String,
    pub(crate) blind_review: bool,
    pub(crate) deadline_days: i64,
    pub(crate) callback_hosts: String,
    pub(crate) created_by: Option<i64>,
    pub(crate) created_at: i64,
    pub(crate) revoked_at: Option<i64>,
}

impl From<AtsConnectionRow> for AtsConnection {
    fn from(r: AtsConnectionRow) -> AtsConnection {
        AtsConnection {
            id: r.id,
            name: r.name,
            // The CHECK constraint admits only the three settings.
            results: ResultsRelease::parse(&r.results).unwrap_or_default(),
            blind_review: r.blind_review,
            deadline_days: r.deadline_days,
            callback_hosts: r.callback_hosts.split_whitespace().map(str::to_string).collect(),
            created_by: r.created_by,
            created_at: r.created_at,
            revoked_at: r.revoked_at,
        }
    }
}

pub(crate) const ATS_CONNECTION_COLS: &str = "id, name, results, blind_review, deadline_days, callback_hosts, created_by, created_at, revoked_at";

pub(crate) const ATS_INTERVIEW_COLS: &str = "id, connection_id, assignment_id, partner_test_id, profile_url, callback_url, callback_done_at, callback_error, created_at";
