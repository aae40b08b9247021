//! One error type for every handler. User errors are shown to the user with
//! their status; internal errors are logged with their cause and answered
//! with a generic message. Pages and the JSON API render it here; the model
//! meter renders the same value in OpenAI's shape (`meter::OpenAiError`),
//! with the code an SDK client tells errors apart by ([`AppError::coded`]).
//!
//! Web handlers return `AppError`, except two that must answer in another
//! shape: the candidate's upload returns `Refusal` (a status and a sentence,
//! rendered on the candidate's page or as JSON; every `AppError` converts into
//! it), and the model meter returns `OpenAiError`, which is not a second error
//! type but a rendering of `AppError`: the same status and message as OpenAI's
//! `{"error": {"message", "type", ...}}`, the `type` being the code the error
//! was given with `AppError::coded` (`budget_exceeded`, `invalid_api_key`,
//! `model_window_closed`, ...; uncoded errors are `server_error`), its extra
//! fields (`cap`, `limit`, `used`) from `with_fields`, and `x-should-retry:
//! false` on every code but the upstream failures and `server_error`. SDK
//! clients map it to their exception types. User errors carry their status and
//! a sentence naming what was wrong; internal errors are logged with their
//! cause and answered with a generic message. API clients get `{"error": ...}`
//! JSON; a browser asking for HTML gets the same message in an error page. A
//! refused upload or import leaves no blob, row or temporary file.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error("{0}")]
    BadRequest(String),
    #[error("sign in first")]
    Unauthorized,
    /// 401 for a credential that is missing, unknown, revoked or expired
    /// (the message says which), e.g. a model key.
    #[error("{0}")]
    BadCredentials(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0} not found")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    /// 410: what was asked for existed and was removed for good (an
    /// erased candidate's link).
    #[error("{0}")]
    Gone(String),
    #[error("{0}")]
    TooLarge(String),
    #[error("{0}")]
    TooManyRequests(String),
    /// Busy for now (a bounded resource is full): 503, try again shortly.
    #[error("{0}")]
    Unavailable(String),
    /// The upstream a request was passed to could not be reached or broke: 502.
    #[error("{0}")]
    BadGateway(String),
    /// The upstream a request was passed to did not answer in time: 504.
    #[error("{0}")]
    GatewayTimeout(String),
    /// `error` with the code an API client tells it apart by (the meter's
    /// OpenAI `type`, e.g. `budget_exceeded`) and extra fields of its error
    /// object (`cap`, `limit`, `used`). Status and message are `error`'s.
    #[error("{error}")]
    Coded { error: Box<AppError>, code: &'static str, fields: Option<serde_json::Value> },
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

/// The message of a request refused because the disk (or the database's)
/// is full: nothing of it was kept.
pub const STORAGE_FULL: &str = "the server is out of disk space, so nothing of this request was kept; try again later (the operator has been told)";

/// Whether `e` or any error it was caused by says the disk or the database
/// is full: `ENOSPC` or `EDQUOT` from a file, SQLite's `SQLITE_FULL`,
/// Postgres's `disk_full` (53100), the sandbox failing a call with
/// `ENOSPC`. Such a failure is the machine's, for now: a request gets 507
/// and a job is retried later without using up an attempt.
pub fn storage_full(e: &anyhow::Error) -> bool {
    e.chain().any(cause_is_storage_full)
}

/// [`storage_full`] for one error and its sources.
pub fn error_is_storage_full(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(c) = cur {
        if cause_is_storage_full(c) {
            return true;
        }
        cur = c.source();
    }
    false
}

fn cause_is_storage_full(c: &(dyn std::error::Error + 'static)) -> bool {
    if let Some(io) = c.downcast_ref::<std::io::Error>() {
        return io_storage_full(io);
    }
    if let Some(sqlx::Error::Database(db)) = c.downcast_ref::<sqlx::Error>() {
        // SQLITE_FULL is 13; Postgres's disk_full is SQLSTATE 53100.
        return matches!(db.code().as_deref(), Some("13") | Some("53100"))
            || db.message().contains("database or disk is full");
    }
    if let Some(s) = c.downcast_ref::<grader::sandbox::SandboxError>() {
        return s.detail.contains("ENOSPC") || s.detail.contains("EDQUOT");
    }
    false
}

/// Whether a file operation failed because the disk or a quota is full.
pub fn io_storage_full(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT))
        || matches!(e.kind(), std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded)
}

impl AppError {
    pub fn status(&self) -> StatusCode {
        if self.internal_cause().is_some_and(storage_full) {
            return StatusCode::INSUFFICIENT_STORAGE;
        }
        match self {
            AppError::BadRequest(_) => StatusCode::BAD_REQUEST,
            AppError::Unauthorized | AppError::BadCredentials(_) => StatusCode::UNAUTHORIZED,
            AppError::Forbidden(_) => StatusCode::FORBIDDEN,
            AppError::NotFound(_) => StatusCode::NOT_FOUND,
            AppError::Conflict(_) => StatusCode::CONFLICT,
            AppError::Gone(_) => StatusCode::GONE,
            AppError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            AppError::TooManyRequests(_) => StatusCode::TOO_MANY_REQUESTS,
            AppError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            AppError::BadGateway(_) => StatusCode::BAD_GATEWAY,
            AppError::GatewayTimeout(_) => StatusCode::GATEWAY_TIMEOUT,
            AppError::Coded { error, .. } => error.status(),
            AppError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The message a user may see.
    pub fn public_message(&self) -> String {
        if self.internal_cause().is_some_and(storage_full) {
            return STORAGE_FULL.into();
        }
        match self {
            AppError::Internal(_) => "internal error; the operator's log has the details".into(),
            AppError::Coded { error, .. } => error.public_message(),
            other => other.to_string(),
        }
    }

    /// This error with the code an API client tells it apart by.
    pub fn coded(self, code: &'static str) -> AppError {
        let error = match self {
            AppError::Coded { error, .. } => error,
            other => Box::new(other),
        };
        AppError::Coded { error, code, fields: None }
    }

    /// This error with extra fields for its error object (a JSON object);
    /// an uncoded error keeps none (it has no object of its own to carry them).
    pub fn with_fields(self, extra: serde_json::Value) -> AppError {
        match self {
            AppError::Coded { error, code, .. } => {
                AppError::Coded { error, code, fields: Some(extra) }
            }
            other => other,
        }
    }

    /// The code given with [`AppError::coded`], if any.
    pub fn code(&self) -> Option<&'static str> {
        match self {
            AppError::Coded { code, .. } => Some(code),
            _ => None,
        }
    }

    /// The extra fields given with [`AppError::with_fields`], if any.
    pub fn fields(&self) -> Option<&serde_json::Value> {
        match self {
            AppError::Coded { fields, .. } => fields.as_ref(),
            _ => None,
        }
    }

    /// The cause of an internal error (coded or not), for the log.
    pub fn internal_cause(&self) -> Option<&anyhow::Error> {
        match self {
            AppError::Internal(e) => Some(e),
            AppError::Coded { error, .. } => error.internal_cause(),
            _ => None,
        }
    }
}

impl From<sqlx::Error> for AppError {
    fn from(e: sqlx::Error) -> AppError {
        // Text Postgres cannot store (a NUL character; SQLite stores it) is
        // the request's fault, whatever field carried it.
        if let sqlx::Error::Database(db) = &e
            && db.code().as_deref() == Some(PG_CHARACTER_NOT_IN_REPERTOIRE)
        {
            return AppError::BadRequest(
                "the request holds a NUL character (or other bytes that are not text), which no text field takes".into(),
            );
        }
        AppError::Internal(e.into())
    }
}

/// Postgres's SQLSTATE for text its encoding has no character for.
const PG_CHARACTER_NOT_IN_REPERTOIRE: &str = "22021";

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        if let Some(e) = self.internal_cause() {
            tracing::error!(error = ?e, "internal error");
        }
        let status = self.status();
        let body = serde_json::json!({ "error": self.public_message() });
        (status, axum::Json(body)).into_response()
    }
}

pub type AppResult<T> = Result<T, AppError>;
