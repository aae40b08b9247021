//! The rows of `assignments` as both backends read them (sqlx's `FromRow` is
//! generic over the database), and their conversion to the area's types.

use sqlx::FromRow;

use crate::db::assignments::*;

#[derive(FromRow)]
pub(crate) struct AssignmentDb {
    pub(crate) id: String,
    pub(crate) packet_version_id: i64,
    pub(crate) slug: String,
    pub(crate) version: Option<i64>,
    pub(crate) candidate_name: String,
    pub(crate) email: String,
    pub(crate) deadline: i64,
    pub(crate) time_box_secs: Option<i64>,
    pub(crate) seed: String,
    pub(crate) state: String,
    pub(crate) started_at: Option<i64>,
    pub(crate) created_by: Option<i64>,
    pub(crate) created_at: i64,
    pub(crate) results: String,
    pub(crate) max_submissions: i64,
    pub(crate) blind_review: bool,
    pub(crate) erased_at: Option<i64>,
}

impl From<AssignmentDb> for Assignment {
    fn from(r: AssignmentDb) -> Assignment {
        Assignment {
            id: r.id,
            packet_version_id: r.packet_version_id,
            slug: r.slug,
            version: r.version,
            candidate_name: r.candidate_name,
            email: r.email,
            deadline: r.deadline,
            time_box_secs: r.time_box_secs,
            seed: r.seed,
            state: r.state,
            started_at: r.started_at,
            created_by: r.created_by,
            created_at: r.created_at,
            // An unknown stored value shows nothing (the safe reading).
            results: ResultsRelease::parse(&r.results).unwrap_or_default(),
            max_submissions: r.max_submissions,
            blind_review: r.blind_review,
            erased_at: r.erased_at,
        }
    }
}

pub(crate) const SELECT: &str = "SELECT a.id, a.packet_version_id, p.slug, v.version, a.candidate_name, a.email, a.deadline, a.time_box_secs,
    a.seed, a.state, a.started_at, a.created_by, a.created_at, a.results, a.max_submissions, a.blind_review, a.erased_at
    FROM assignments a JOIN packet_versions v ON v.id = a.packet_version_id JOIN packets p ON p.id = v.packet_id";
