//! The rows of `witness` as both backends read them (sqlx's `FromRow` is
//! generic over the database), and their conversion to the area's types.

use grader::witness::WitnessKind;
use sqlx::FromRow;

use crate::db::witness::*;

#[derive(FromRow)]
pub(crate) struct WitnessDb {
    pub(crate) id: i64,
    pub(crate) assignment_id: String,
    #[sqlx(try_from = "String")]
    pub(crate) kind: WitnessKind,
    pub(crate) at: i64,
    pub(crate) accepted: i64,
    pub(crate) exit_code: Option<i64>,
    pub(crate) log: String,
    pub(crate) tree_sha256: String,
    pub(crate) env_json: String,
    pub(crate) refusal: Option<String>,
}

impl From<WitnessDb> for WitnessRunRow {
    fn from(r: WitnessDb) -> WitnessRunRow {
        WitnessRunRow {
            id: r.id,
            assignment_id: r.assignment_id,
            kind: r.kind,
            at: r.at,
            accepted: r.accepted != 0,
            exit_code: r.exit_code,
            log: r.log,
            tree_sha256: r.tree_sha256,
            env_json: r.env_json,
            refusal: r.refusal,
        }
    }
}

pub(crate) const SELECT: &str = "SELECT id, assignment_id, kind, at, accepted, exit_code, log, tree_sha256, env_json, refusal FROM witness_runs";
