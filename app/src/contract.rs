//! Names and shapes that cross crates: the states and kinds the database
//! stores as text, and the JSON the status endpoints answer and the islands
//! read. The server writes these types and the islands deserialize them, so
//! a renamed field or state breaks the build instead of a page. A leaf.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A stored name that is none of its type's names (a database value the
/// migrations' CHECK constraints should have kept out).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownName {
    pub what: &'static str,
    pub value: String,
}

impl fmt::Display for UnknownName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} is not a {}", self.value, self.what)
    }
}

impl std::error::Error for UnknownName {}

/// An enum stored and sent as one of a fixed set of lowercase names.
macro_rules! names {
    ($(#[$doc:meta])* $name:ident ($what:literal) { $($(#[$vdoc:meta])* $variant:ident = $text:literal,)+ }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum $name {
            $($(#[$vdoc])* #[serde(rename = $text)] $variant,)+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The stored and sent name.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }

            pub fn parse(text: &str) -> Result<$name, UnknownName> {
                match text {
                    $($text => Ok($name::$variant),)+
                    _ => Err(UnknownName { what: $what, value: text.to_string() }),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = UnknownName;
            fn from_str(text: &str) -> Result<$name, UnknownName> {
                $name::parse(text)
            }
        }

        /// How the database rows decode it (`#[sqlx(try_from = "String")]`).
        impl TryFrom<String> for $name {
            type Error = UnknownName;
            fn try_from(text: String) -> Result<$name, UnknownName> {
                $name::parse(&text)
            }
        }
    };
}

names! {
    /// Where a submission is: stored and waiting, being graded, or finished
    /// (graded, failed for good, or refused at ingestion).
    SubmissionState ("submission state") {
        Queued = "queued",
        Grading = "grading",
        Graded = "graded",
        Failed = "failed",
        Refused = "refused",
    }
}

impl SubmissionState {
    /// Nothing changes after these (until a reviewer asks for a regrade).
    pub fn is_final(self) -> bool {
        matches!(self, SubmissionState::Graded | SubmissionState::Failed | SubmissionState::Refused)
    }
}

names! {
    /// A queued job's state; packet audits share it.
    JobState ("job state") {
        Queued = "queued",
        Running = "running",
        Done = "done",
        Failed = "failed",
    }
}

impl JobState {
    /// Waiting for a worker or held by one.
    pub fn is_pending(self) -> bool {
        matches!(self, JobState::Queued | JobState::Running)
    }

    pub fn is_final(self) -> bool {
        !self.is_pending()
    }
}

names! {
    /// What a job does, and so what its subject names.
    JobKind ("job kind") {
        /// Grades a submission (subject: the submission id).
        Grade = "grade",
        /// Self-tests a packet version (subject: the version id).
        Check = "check",
        /// Audits a version's hidden tests (subject: the packet audit id).
        Audit = "audit",
    }
}

/// The states after which a live pill stops polling: a submission's final
/// states and a job's or packet audit's (done, failed).
pub const FINAL_STATES: [&str; 4] = ["graded", "failed", "refused", "done"];

/// What every status endpoint answers at least; the live state pill reads
/// only this (a submission's, a self-test's or an audit's state).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LiveState {
    pub state: String,
}

/// The reviewer's `/submissions/{id}/status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubmissionStatus {
    pub state: SubmissionState,
    pub decision: Option<String>,
    pub score: Option<f64>,
}

/// The candidate's `/c/{token}/submissions/{id}/status`: the state and the
/// receipt's digest, and the decision and score only once released.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CandidateStatus {
    pub state: SubmissionState,
    pub receipt_digest: Option<String>,
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub result: Option<ReleasedResult>,
    /// While it is queued: its place in line and the estimated wait.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<QueueWait>,
}

/// A queued submission's place in line and the estimated wait.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueWait {
    /// 1 when it is the next a worker claims.
    pub position: u64,
    /// Gradings under way now.
    pub running: u64,
    /// Seconds until it should be graded, when the server knows how long a
    /// grading takes.
    pub estimate_secs: Option<u64>,
    /// All of it in one sentence, as the page shows it.
    pub sentence: String,
}

/// What the candidate's live status pill reads: the state, and while the
/// submission waits, the sentence about its place in line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LiveWait {
    pub state: String,
    #[serde(default)]
    pub queue: Option<QueueWait>,
}

/// A graded submission's outcome, as the candidate may see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReleasedResult {
    pub decision: Option<String>,
    pub score: Option<f64>,
}

/// `/queue/status`: pending jobs, then recently finished ones.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueStatus {
    pub jobs: Vec<QueueJob>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueJob {
    pub id: i64,
    pub kind: JobKind,
    pub subject: String,
    pub state: JobState,
    pub attempts: i64,
    pub lease_until: Option<i64>,
    pub last_error: Option<String>,
}

impl QueueStatus {
    /// What changes when any job moves: the live queue reloads on a change.
    pub fn signature(&self) -> String {
        self.jobs.iter().map(|j| format!("{}:{}:{};", j.id, j.state, j.attempts)).collect()
    }
}

/// The candidate's view of the meter (`/c/{token}/meter`): key, endpoint,
/// window and what is left of each budget. The live budget island polls it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeterStatus {
    /// The current key, or None when it was revoked.
    pub key: Option<String>,
    /// The OpenAI-compatible base URL (`<public url>/v1`).
    pub endpoint: String,
    pub upstream_configured: bool,
    pub waits_for_red: bool,
    /// False before a witnessed red when the packet makes the model wait.
    pub window_open: bool,
    pub caps: Vec<CapUse>,
    /// Calls recorded (forwarded or refused).
    pub calls_recorded: i64,
}

/// One cap's use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapUse {
    /// The manifest name: model_calls, tokens, request_bytes, time_box_minutes.
    pub cap: String,
    pub limit: i64,
    pub used: i64,
    pub left: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_ones_are_named() {
        for s in SubmissionState::ALL {
            assert_eq!(SubmissionState::parse(s.as_str()), Ok(*s));
            assert_eq!(serde_json::to_value(s).unwrap(), serde_json::json!(s.as_str()));
        }
        for k in JobKind::ALL {
            assert_eq!(k.as_str().parse::<JobKind>(), Ok(*k));
        }
        let e = JobState::parse("lost").unwrap_err();
        assert_eq!(e.to_string(), "\"lost\" is not a job state");
        assert!(JobKind::try_from("lint".to_string()).is_err());
        assert!(serde_json::from_str::<SubmissionState>("\"Graded\"").is_err());
    }

    #[test]
    fn final_states_agree_with_the_types() {
        for s in SubmissionState::ALL {
            assert_eq!(s.is_final(), FINAL_STATES.contains(&s.as_str()), "{s}");
        }
        for s in JobState::ALL {
            assert_eq!(s.is_final(), FINAL_STATES.contains(&s.as_str()), "{s}");
        }
    }

    #[test]
    fn the_candidate_status_carries_a_result_only_when_released() {
        let hidden = CandidateStatus {
            state: SubmissionState::Graded,
            receipt_digest: Some("ab".into()),
            result: None,
            queue: None,
        };
        let json = serde_json::to_value(&hidden).unwrap();
        assert_eq!(json, serde_json::json!({"state": "graded", "receipt_digest": "ab"}));
        let shown = CandidateStatus {
            result: Some(ReleasedResult { decision: Some("advance".into()), score: Some(80.0) }),
            ..hidden
        };
        let json = serde_json::to_value(&shown).unwrap();
        assert_eq!(json["decision"], "advance");
        assert_eq!(serde_json::from_value::<CandidateStatus>(json).unwrap(), shown);
    }

    #[test]
    fn the_queue_signature_changes_with_states() {
        let job = |state| QueueJob {
            id: 1,
            kind: JobKind::Grade,
            subject: "s".into(),
            state,
            attempts: 0,
            lease_until: None,
            last_error: None,
        };
        let a = QueueStatus { jobs: vec![job(JobState::Queued)] };
        let b = QueueStatus { jobs: vec![job(JobState::Running)] };
        assert_ne!(a.signature(), b.signature());
        assert_eq!(a.signature(), a.clone().signature());
    }
}
