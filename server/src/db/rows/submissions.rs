//! The columns of `submissions` as both backends select them (the
//! `Submission` type decodes them itself: sqlx's `FromRow` is generic over
//! the database).

pub(crate) const SELECT: &str = "SELECT s.id, s.assignment_id, s.blob_sha256, s.size_bytes, s.received_at, s.state, s.refusal, s.error,
    s.scorecard_json, s.receipt_json, s.decision, s.score, s.graded_at FROM submissions s";
