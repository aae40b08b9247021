//! The job queue: rows claimed with a lease. A worker that dies stops
//! renewing its lease; once the lease expires the job is claimable again.
//! Completion is conditional on still holding the lease, so a job never
//! completes twice.

use app::contract::{JobKind, JobState};
use async_trait::async_trait;
use serde::Serialize;

use super::DbResult;

/// A row of `jobs`; a kind or state outside the CHECK constraint is a
/// decode error.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct Job {
    pub id: i64,
    /// `grade` (subject: submission id), `check` (subject: packet version id)
    /// or `audit` (subject: packet audit id).
    #[sqlx(try_from = "String")]
    pub kind: JobKind,
    pub subject: String,
    #[sqlx(try_from = "String")]
    pub state: JobState,
    pub attempts: i64,
    pub max_attempts: i64,
    /// Claimed highest first: 0 for gradings and an author's checks and
    /// audits, [`BUILTIN_CHECK_PRIORITY`] for the built-in library's.
    pub priority: i64,
    pub lease_owner: Option<String>,
    pub lease_until: Option<i64>,
    pub last_error: Option<String>,
    pub created_at: i64,
    pub finished_at: Option<i64>,
}

/// The priority of the server's background self-tests of built-in packet
/// versions: below every grading and every author's job.
pub const BUILTIN_CHECK_PRIORITY: i64 = -10;

/// Which jobs a worker claims. Gradings never wait behind a background
/// self-test: the built-in library's checks ([`BUILTIN_CHECK_PRIORITY`]
/// and below) have a lane of their own, and the workers that grade never
/// claim them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    /// Every job (tests and tools that drain the queue by hand).
    Any,
    /// Gradings and everything an author asked for (priority above the
    /// background's).
    Foreground,
    /// The built-in library's background self-tests only.
    Background,
}

impl Lane {
    /// The priorities the lane claims, inclusive.
    pub fn priorities(self) -> (i64, i64) {
        match self {
            Lane::Any => (i64::MIN, i64::MAX),
            Lane::Foreground => (BUILTIN_CHECK_PRIORITY + 1, i64::MAX),
            Lane::Background => (i64::MIN, BUILTIN_CHECK_PRIORITY),
        }
    }
}

/// Where a queued grading stands in the foreground lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct QueuePlace {
    /// Queued foreground jobs a worker will claim before this one.
    pub ahead: i64,
    /// Foreground jobs running now.
    pub running: i64,
}

#[async_trait]
pub trait JobStore {
    /// Enqueues a job of priority 0.
    async fn enqueue(&self, kind: JobKind, subject: &str) -> DbResult<i64> {
        self.enqueue_with_priority(kind, subject, 0).await
    }
    async fn enqueue_with_priority(
        &self,
        kind: JobKind,
        subject: &str,
        priority: i64,
    ) -> DbResult<i64>;
    /// Claims a queued job, or a running one whose lease expired, for
    /// `owner` until `now + lease_ms`; bumps `attempts`. The highest
    /// priority goes first; within one, gradings take turns across
    /// assignments, then the oldest goes first.
    async fn claim_job(&self, owner: &str, now: i64, lease_ms: i64) -> DbResult<Option<Job>> {
        self.claim_job_in(owner, now, lease_ms, Lane::Any).await
    }
    /// As [`JobStore::claim_job`], only among the jobs of `lane`.
    async fn claim_job_in(
        &self,
        owner: &str,
        now: i64,
        lease_ms: i64,
        lane: Lane,
    ) -> DbResult<Option<Job>>;
    /// Where the queued job `id` stands in the foreground lane, in the
    /// order workers claim; None when it is not queued.
    async fn queue_place(&self, id: i64) -> DbResult<Option<QueuePlace>>;
    /// Raises a queued job's priority to at least `priority` (an author asks
    /// for a check the background queued lower); false when not queued.
    async fn raise_priority(&self, id: i64, priority: i64) -> DbResult<bool>;
    /// Extends the lease; false when `owner` no longer holds it.
    async fn renew_lease(&self, id: i64, owner: &str, until: i64) -> DbResult<bool>;
    /// Marks the job done (or failed) if `owner` still holds it; false otherwise.
    async fn finish_job(
        &self,
        id: i64,
        owner: &str,
        ok: bool,
        error: Option<&str>,
    ) -> DbResult<bool>;
    /// Puts a job whose attempt failed back in the queue, or fails it for good
    /// when attempts are used up; [`Released::Lost`] when `owner` no longer
    /// held it (nothing changes then).
    async fn release_job(&self, id: i64, owner: &str, error: &str) -> DbResult<Released>;
    /// Puts a job whose attempt failed on the machine, not on the work (the
    /// disk or the database is full), back in the queue without using up
    /// an attempt: it is retried once there is room, never failed for it.
    /// [`Released::Lost`] when `owner` no longer held it.
    async fn release_job_uncounted(&self, id: i64, owner: &str, error: &str) -> DbResult<Released>;
    async fn job_by_id(&self, id: i64) -> DbResult<Option<Job>>;
    async fn jobs_for(&self, kind: JobKind, subject: &str) -> DbResult<Vec<Job>>;
    /// Queued and running jobs, oldest first.
    async fn pending_jobs(&self) -> DbResult<Vec<Job>>;
    /// The newest `limit` jobs of any state, newest first.
    async fn recent_jobs(&self, limit: i64) -> DbResult<Vec<Job>>;
    /// Finishes a `grade` job and stores its result in one transaction, only
    /// while `owner` still holds the job's lease; false (and nothing stored)
    /// otherwise, so a job never completes twice.
    async fn complete_grade_job(
        &self,
        job_id: i64,
        owner: &str,
        submission_id: &str,
        result: GradeResult<'_>,
    ) -> DbResult<bool>;
    /// Calls `wake` whenever any process queues a job, from a task of its
    /// own, for as long as the process runs (Postgres: `LISTEN` on the
    /// channel the `jobs` trigger notifies). Returns false when the backend
    /// has no such signal (SQLite: workers are woken in-process and poll).
    async fn listen_for_jobs(&self, _wake: JobWake) -> DbResult<bool> {
        Ok(false)
    }
}

/// What [`JobStore::listen_for_jobs`] calls on each job queued.
pub type JobWake = std::sync::Arc<dyn Fn() + Send + Sync>;

/// What became of a job whose attempt failed and was handed back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Released {
    /// Queued again for another attempt.
    Requeued,
    /// Failed for good: its attempts are used up.
    Failed,
    /// The worker no longer held the lease, so nothing changed.
    Lost,
}

impl Released {
    /// From the state the release's `UPDATE … RETURNING state` gave, or
    /// none when no row matched (the lease was no longer held).
    pub(crate) fn from_returned(state: Option<&str>) -> DbResult<Released> {
        Ok(
            match state
                .map(JobState::parse)
                .transpose()
                .map_err(|e| sqlx::Error::Decode(Box::new(e)))?
            {
                None => Released::Lost,
                Some(JobState::Failed) => Released::Failed,
                Some(_) => Released::Requeued,
            },
        )
    }
}

/// What a finished `grade` job stores on its submission.
pub enum GradeResult<'a> {
    Graded {
        scorecard_json: &'a str,
        receipt_json: &'a str,
        decision: &'a str,
        score: Option<f64>,
    },
    /// The grader refused the submission at ingestion; the reason is shown.
    Refused {
        reason: &'a str,
    },
}
