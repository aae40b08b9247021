//! Candidate data: erasure, retention and the candidate's own copy (#31).
//!
//! [`erase`] removes everything the platform holds about one candidate:
//! the model keys are revoked first (the meter forgets them), then one
//! database transaction (`ErasureStore::erase_assignment`) deletes their
//! submissions, grading jobs, human scores, webhook deliveries, witnessed
//! runs, ledger rows and totals, redacts the audit entries about them (and
//! any naming their email as a whole address, [`names_address`]: another
//! address that contains it is not theirs), empties the name and email and
//! records the erasure; then the blobs only
//! they referred to (uploads, transcripts) are removed from
//! the local folder (with Postgres their chunks went in the transaction).
//! A blob another candidate also refers to (an identical zip) stays. With
//! SQLite, `secure_delete` zeroes what the deletes free and a `TRUNCATE`
//! checkpoint empties the write-ahead log, so no copy of a deleted row is
//! left in the files.
//!
//! The assignment row stays as a tombstone (no name, no email, its link's
//! hash replaced), so lists and the ATS say "erased" (and nothing else)
//! and the link answers 410 ([`crate::assignment::erased_message`]) on
//! every surface, the API included, instead of 404 or 401;
//! `erasures` keeps who, when, why, how much went, and the final score and
//! decision (the packet's aggregates, no personal data).
//!
//! Work of the candidate's still under way when they are erased leaves
//! nothing: the transaction marks the assignment first, so an upload or a
//! witnessed run that ends during it waits for the row and then finds it
//! erased (`create_submission`, `add_witness_run`: 410, its blob
//! forgotten); a transcript the meter is still writing is waited for
//! before the files go (`BatchWriter::written`), and a model call settled
//! after its row went removes its own transcripts ([`forget_late_blobs`]).
//! An erasure refused because a grading is queued or running changes
//! nothing: it is checked before the keys are revoked, and when a grading
//! was queued in between, the keys it revoked are given back.
//!
//! [`sweep_retention`] erases, from the server's sweep, every assignment
//! whose retention (the packet's `retention_days`, else the global setting)
//! has run out since its deadline. The candidate's own copy of everything
//! held about them is `crate::web::retention::export`.
//!
//! Invariant: an erased link resolves to 410 in `assignment::by_token` (through
//! `erasures.link_hash`), never to an assignment, so no handler can serve it by
//! forgetting a check; SQLite's `secure_delete` is on for every connection.

use crate::db::{Assignment, EraseReason, EraseRefusal, RETENTION_SETTING};
use crate::error::AppError;
use crate::state::AppState;
use crate::times::utc;

/// The longest retention that can be set, in days (ten years).
pub const MAX_RETENTION_DAYS: i64 = 3650;

/// What an erasure removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Erased {
    pub submissions: i64,
    pub witness_runs: i64,
    pub model_calls: i64,
    pub rows: i64,
    pub blobs: i64,
    pub bytes: u64,
}

impl From<&crate::db::Erasure> for Erased {
    fn from(e: &crate::db::Erasure) -> Erased {
        Erased {
            submissions: e.submissions,
            witness_runs: e.witness_runs,
            model_calls: e.model_calls,
            rows: e.rows_removed,
            blobs: e.blobs_removed,
            bytes: e.bytes_removed as u64,
        }
    }
}

impl Erased {
    pub fn summary(&self) -> String {
        format!(
            "{} submission(s), {} witnessed run(s), {} model call(s), {} row(s), {} file(s) of {} bytes",
            self.submissions,
            self.witness_runs,
            self.model_calls,
            self.rows,
            self.blobs,
            self.bytes
        )
    }
}

/// Erases assignment `a`'s candidate. `actor` is `user:<id>` or
/// `system:retention`. Refused (409) while one of their gradings is queued
/// or running, and for an assignment already erased.
pub async fn erase(
    state: &AppState,
    a: &Assignment,
    actor: &str,
    reason: EraseReason,
) -> Result<Erased, AppError> {
    if let Some(at) = a.erased_at {
        return Err(AppError::Conflict(format!("assignment {} was erased on {}", a.id, utc(at))));
    }
    // Refused before anything changes (the candidate keeps a working model
    // key); the transaction checks again.
    if state.db.grading_of(&a.id).await? {
        return Err(grading_refusal(a, false));
    }
    // The meter stops taking the key before its rows go.
    let now = crate::now_ms();
    crate::meter::revoke_keys_at(state, a, now).await?;
    let rows = match state.db.erase_assignment(&a.id, actor, reason, now).await? {
        Ok(rows) => rows,
        Err(EraseRefusal::NotFound) => {
            return Err(AppError::NotFound(format!("assignment {:?}", a.id)));
        }
        Err(EraseRefusal::AlreadyErased { at }) => {
            return Err(AppError::Conflict(format!(
                "assignment {} was erased on {}",
                a.id,
                utc(at)
            )));
        }
        // A grading queued since the check above: the keys revoked for
        // this erasure work again.
        Err(EraseRefusal::Grading) => {
            let restored = state.db.restore_model_keys(&a.id, now).await?;
            state.memo.meter.forget_keys_of(&a.id);
            tracing::info!(assignment = %a.id, restored, "erasure refused: a grading was queued meanwhile");
            return Err(grading_refusal(a, true));
        }
    };
    state.memo.meter.forget_keys_of(&a.id);
    state.memo.similarity.clear();
    // A transcript the meter is still writing lands before its file goes.
    let shas: Vec<&str> = rows.blobs.iter().map(|(sha, _)| sha.as_str()).collect();
    state.memo.blob_writer.written(&shas, WRITES_WAIT).await;
    let mut bytes = 0u64;
    let mut removed = 0i64;
    for (sha, in_db) in &rows.blobs {
        let path = crate::blobs::blob_path(&state.config.data_dir, sha);
        match tokio::fs::metadata(&path).await {
            Ok(m) => {
                tokio::fs::remove_file(&path).await.map_err(|e| {
                    AppError::Internal(anyhow::anyhow!("removing {}: {e}", path.display()))
                })?;
                bytes += m.len();
                removed += 1;
            }
            // With Postgres a blob need not be cached here; its chunks went
            // with the transaction.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if let Some(size) = in_db {
                    bytes += *size as u64;
                    removed += 1;
                }
            }
            Err(e) => {
                return Err(AppError::Internal(anyhow::anyhow!("reading {}: {e}", path.display())));
            }
        }
    }
    state.db.set_erasure_bytes(&a.id, removed, bytes as i64).await?;
    let erased = Erased {
        submissions: rows.submissions,
        witness_runs: rows.witness_runs,
        model_calls: rows.model_calls,
        rows: rows.rows,
        blobs: removed,
        bytes,
    };
    state
        .db
        .audit(
            actor,
            "candidate.erase",
            &format!("assignment:{}", a.id),
            &format!("{} ({})", erased.summary(), reason.as_str()),
        )
        .await?;
    if let Err(e) = state.db.compact_after_erasure().await {
        tracing::warn!(assignment = %a.id, error = %e, "checkpointing after an erasure");
    }
    metrics::counter!("gatehouse_erasures_total", "reason" => reason.as_str()).increment(1);
    tracing::info!(assignment = %a.id, reason = reason.as_str(), "candidate data erased");
    Ok(erased)
}

/// Whether `text` names the address `email` as a whole: an occurrence
/// (ignoring case) with no character before it that an address could hold
/// and none after it that could carry its domain on. So `ada@example.org`
/// is named in `invite sent to <ada@example.org>.` and not in
/// `nada@example.org` or `ada@example.org.uk` (another candidate's
/// addresses, which an erasure must not redact).
pub fn names_address(text: &str, email: &str) -> bool {
    let email = email.trim().to_lowercase();
    if email.is_empty() {
        return false;
    }
    let text = text.to_lowercase();
    // What an address's local part may hold (RFC 5322's atext and the
    // dot), and `@`.
    let local = |c: char| c.is_alphanumeric() || ".!#$%&'*+/=?^_`{|}~-@".contains(c);
    let domain = |c: char| c.is_alphanumeric() || c == '-' || c == '_' || c == '@';
    let mut from = 0;
    while let Some(i) = text[from..].find(&email) {
        let (start, end) = (from + i, from + i + email.len());
        let before = text[..start].chars().next_back();
        let mut after = text[end..].chars();
        let continues = match after.next() {
            None => false,
            // A dot ends a sentence, or starts another label of the domain.
            Some('.') => after.next().is_some_and(domain),
            Some(c) => domain(c),
        };
        if !before.is_some_and(local) && !continues {
            return true;
        }
        from = start + text[start..].chars().next().map_or(1, char::len_utf8);
    }
    false
}

/// `text` as a `LIKE` pattern that matches itself only (`\` escapes).
pub fn like_literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The longest an erasure (or a call settled after one) waits for the
/// blobs being written to land before removing them.
const WRITES_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// The 409 of an erasure while a grading of the candidate is queued or
/// running; `meanwhile` when it was queued while the erasure began.
fn grading_refusal(a: &Assignment, meanwhile: bool) -> AppError {
    AppError::Conflict(if meanwhile {
        format!(
            "a submission of assignment {} was queued for grading while it was being erased, so nothing was erased; erase it once the grading ends",
            a.id
        )
    } else {
        format!(
            "a submission of assignment {} is being graded; erase it once the grading ends",
            a.id
        )
    })
}

/// Removes the blobs `shas` (a model call's transcripts) once they are
/// written, unless something refers to them: a call whose row an erasure
/// deleted while the call was in flight leaves nothing behind. How many
/// went.
pub async fn forget_late_blobs(state: &AppState, shas: &[&str]) -> usize {
    state.memo.blob_writer.written(shas, WRITES_WAIT).await;
    let mut removed = 0;
    for sha in shas {
        match state.db.forget_unused_blob(sha).await {
            Ok(Some(_)) => {}
            Ok(None) => continue,
            Err(e) => {
                tracing::warn!(blob = %sha, error = %e, "forgetting a late blob");
                continue;
            }
        }
        let path = crate::blobs::blob_path(&state.config.data_dir, sha);
        match tokio::fs::remove_file(&path).await {
            Ok(()) => removed += 1,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(blob = %sha, error = %e, "removing a late blob"),
        }
    }
    removed
}

/// The global retention in days, if set.
pub async fn global_retention(state: &AppState) -> Result<Option<i64>, AppError> {
    Ok(state.db.setting(RETENTION_SETTING).await?.and_then(|v| v.trim().parse().ok()))
}

/// Parses a retention field: empty is none, else whole days from 0 to
/// [`MAX_RETENTION_DAYS`].
pub fn parse_days(field: &str) -> Result<Option<i64>, AppError> {
    let field = field.trim();
    if field.is_empty() {
        return Ok(None);
    }
    match field.parse::<i64>() {
        Ok(d) if (0..=MAX_RETENTION_DAYS).contains(&d) => Ok(Some(d)),
        _ => Err(AppError::BadRequest(format!(
            "retention {field:?} is not a whole number of days from 0 to {MAX_RETENTION_DAYS} (leave it empty to keep data until erased by hand)"
        ))),
    }
}

/// Erases every assignment whose retention ran out by now (at most `limit`
/// a round); returns how many. One that cannot be erased yet (a grading of
/// it runs) is left for the next round; a failure is logged, never returned.
pub async fn sweep_retention(state: &AppState, limit: i64) -> usize {
    let global = match global_retention(state).await {
        Ok(g) => g,
        Err(e) => {
            tracing::warn!(error = %e, "reading the retention setting");
            return 0;
        }
    };
    let due = match state.db.due_erasures(global, crate::now_ms(), limit).await {
        Ok(due) => due,
        Err(e) => {
            tracing::warn!(error = %e, "listing assignments due for erasure");
            return 0;
        }
    };
    let mut erased = 0;
    for d in due {
        let a = match state.db.assignment_by_id(&d.assignment_id).await {
            Ok(Some(a)) => a,
            Ok(None) => continue,
            Err(e) => {
                tracing::warn!(assignment = %d.assignment_id, error = %e, "reading an assignment due for erasure");
                continue;
            }
        };
        match erase(state, &a, "system:retention", EraseReason::Retention).await {
            Ok(_) => erased += 1,
            Err(AppError::Conflict(why)) => {
                tracing::debug!(assignment = %a.id, "retention erasure waits: {why}")
            }
            Err(e) => tracing::warn!(assignment = %a.id, error = %e, "retention erasure failed"),
        }
    }
    erased
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(field: &str, expect: Result<Option<i64>, &str>) {
        match (parse_days(field), expect) {
            (Ok(got), Ok(want)) => assert_eq!(got, want, "{field:?}"),
            (Err(e), Err(part)) => assert!(e.to_string().contains(part), "{field:?}: {e}"),
            (got, want) => panic!("{field:?}: got {got:?}, expected {want:?}"),
        }
    }

    #[test]
    fn an_address_is_named_as_a_whole_token_only() {
        let email = "Ada.Lovelace+q@Example.org";
        for (text, named) in [
            ("ada.lovelace+q@example.org", true),
            ("invite sent to Ada <ada.lovelace+q@example.org>", true),
            ("mailed ada.lovelace+q@example.org.", true),
            ("to: ADA.LOVELACE+Q@EXAMPLE.ORG, cc someone", true),
            ("(ada.lovelace+q@example.org)", true),
            // Another address that holds this one.
            ("nada.lovelace+q@example.org", false),
            ("x.ada.lovelace+q@example.org", false),
            ("ada.lovelace+q@example.org.uk", false),
            ("ada.lovelace+q@example.organic", false),
            ("ada.lovelace+q@example.org-mail.net", false),
            ("b+ada.lovelace+q@example.org", false),
            // Both: one of them names it.
            ("nada.lovelace+q@example.org and ada.lovelace+q@example.org", true),
            ("", false),
        ] {
            assert_eq!(names_address(text, email), named, "{text:?}");
        }
        assert!(!names_address("anything", "  "));
        // Non-ASCII text around it is walked by characters.
        assert!(names_address("é ada.lovelace+q@example.org é", email));
        assert!(!names_address("éada.lovelace+q@example.org", email));
        assert_eq!(like_literal(r"a_b%c\d"), r"a\_b\%c\\d");
    }

    #[test]
    fn retention_days_are_parsed_once_with_their_bounds() {
        check("", Ok(None));
        check("  ", Ok(None));
        check("0", Ok(Some(0)));
        check(" 30 ", Ok(Some(30)));
        check("3650", Ok(Some(3650)));
        check("3651", Err("from 0 to 3650"));
        check("-1", Err("from 0 to 3650"));
        check("1.5", Err("whole number"));
        check("99999999999999999999", Err("whole number"));
    }
}
