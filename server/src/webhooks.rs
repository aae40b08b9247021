//! Signed webhooks, per the Standard Webhooks specification
//! (<https://www.standardwebhooks.com>).
//!
//! An event ([`Event`]) is written to the outbox (`webhook_deliveries`),
//! one delivery per enabled endpoint subscribed to it, by whichever process
//! saw it happen (a server or a worker). The server's deliverer
//! ([`spawn`]) posts due deliveries: the body is
//! `{"type", "timestamp", "data"}`, the headers `webhook-id` (the same on
//! every attempt and redelivery), `webhook-timestamp` (the attempt's Unix
//! seconds) and `webhook-signature` (`v1,` and the base64 HMAC-SHA256 of
//! `id.timestamp.body` under the endpoint's secret). A 2xx answer delivers;
//! anything else is tried again after `webhook_retry_base_ms`, doubled per
//! attempt up to an hour, until `webhook_max_attempts` (then `failed`, and
//! an admin may redeliver). A delivery is a row: it survives a restart,
//! and an attempt is held by a lease, so two deliverers never post the same
//! delivery at once. A deliverer that dies after the receiver answered but
//! before it recorded the answer posts again once the lease passes: at
//! least once, and receivers deduplicate by `webhook-id`, as the
//! specification asks.
//!
//! Events carry identifiers and links, never a score, a name or an email:
//! a receiver reads the rest through the API with its own token, under the
//! assignment's release and blind-review settings.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Value, json};

use crate::db::{AttemptEnd, WebhookDelivery};
use crate::state::AppState;

/// The events an endpoint may subscribe to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A submission was accepted (uploaded in the browser or the API).
    SubmissionReceived,
    /// A submission's grading ended: graded, refused or failed.
    SubmissionGraded,
    /// A reviewer saved a human score.
    SubmissionScored,
    /// A submission's results became visible to the candidate (and the ATS).
    ResultsReleased,
}

impl Event {
    pub const ALL: [Event; 4] = [
        Event::SubmissionReceived,
        Event::SubmissionGraded,
        Event::SubmissionScored,
        Event::ResultsReleased,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Event::SubmissionReceived => "submission.received",
            Event::SubmissionGraded => "submission.graded",
            Event::SubmissionScored => "submission.scored",
            Event::ResultsReleased => "results.released",
        }
    }

    pub fn parse(s: &str) -> Option<Event> {
        Event::ALL.into_iter().find(|e| e.as_str() == s)
    }
}

/// The longest answer body kept per attempt (what the admin page shows).
const ANSWER_KEPT: usize = 1024;
/// How long an attempt holds its delivery: past the HTTP timeout, so a
/// live attempt is never doubled.
const LEASE_MS: i64 = 60_000;
/// The longest wait between two attempts.
const MAX_BACKOFF_MS: i64 = 3_600_000;

/// A new endpoint secret: `whsec_` and the base64 of 32 random bytes.
pub fn new_secret() -> String {
    let key: [u8; 32] = rand::random();
    format!("whsec_{}", B64.encode(key))
}

/// The `webhook-signature` header of one attempt: `v1,<base64 HMAC-SHA256>`
/// of `{id}.{timestamp}.{body}` keyed by the secret's decoded bytes. None
/// when the secret is not `whsec_` and base64.
pub fn sign(secret: &str, id: &str, timestamp: i64, body: &str) -> Option<String> {
    let key = B64.decode(secret.strip_prefix("whsec_").unwrap_or(secret)).ok()?;
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &key);
    let tag = ring::hmac::sign(&key, format!("{id}.{timestamp}.{body}").as_bytes());
    Some(format!("v1,{}", B64.encode(tag.as_ref())))
}

/// Writes `event` with `data` to the outbox for every endpoint that wants
/// it. A failure is logged, never returned: the change the event reports
/// has happened, and its caller's answer stands.
pub async fn emit(state: &AppState, event: Event, data: Value) {
    let now = crate::now_ms();
    let message_id = format!("msg_{}", &crate::auth::password::random_token()[..26]);
    let payload = json!({
        "type": event.as_str(),
        "timestamp": crate::times::rfc3339(now),
        "data": data,
    })
    .to_string();
    match state.db.queue_webhook_event(&message_id, event.as_str(), &payload, now).await {
        Ok(0) => {}
        Ok(n) => {
            metrics::counter!("gatehouse_webhook_events_total", "event" => event.as_str())
                .increment(1);
            tracing::debug!(
                event = event.as_str(),
                message_id,
                endpoints = n,
                "webhook event queued"
            );
        }
        Err(e) => {
            tracing::error!(event = event.as_str(), error = %e, "queueing a webhook event failed")
        }
    }
}

/// The data of a submission's events: its ids and where a reviewer reads it.
pub fn submission_data(state: &AppState, submission_id: &str, assignment_id: &str) -> Value {
    let base = state.config.public_url.trim_end_matches('/');
    json!({
        "submission_id": submission_id,
        "assignment_id": assignment_id,
        "url": format!("{base}/submissions/{submission_id}"),
    })
}

/// What may have released a submission's results.
#[derive(Debug, Clone, Copy)]
pub enum Release {
    /// Its grading ended.
    Grading,
    /// A reviewer saved a human score; it had this many before.
    Score { before: usize },
}

/// Emits `results.released` when `by` released the submission's results:
/// they are released now (the assignment's `results` and blind review, as
/// the ATS sees them) and were not before. A grading releases what it
/// grades when results go out immediately without blind review; otherwise
/// the first human score does.
pub async fn released_now(state: &AppState, submission_id: &str, by: Release) {
    let check = async {
        let Some(s) = state.db.submission_by_id(submission_id).await? else {
            return Ok::<_, crate::error::AppError>(None);
        };
        let Some(a) = state.db.assignment_by_id(&s.assignment_id).await? else {
            return Ok(None);
        };
        if !crate::ats::released(state, a.results, a.blind_review, &s).await? {
            return Ok(None);
        }
        let at_grading = a.results == crate::db::ResultsRelease::Immediately && !a.blind_review;
        let now = match by {
            Release::Grading => true,
            Release::Score { before } => before == 0 && !at_grading,
        };
        Ok(now.then_some(s))
    };
    match check.await {
        Ok(Some(s)) => {
            emit(state, Event::ResultsReleased, submission_data(state, &s.id, &s.assignment_id))
                .await
        }
        Ok(None) => {}
        Err(e) => {
            tracing::error!(submission = submission_id, error = %e, "checking a release failed")
        }
    }
}

/// When attempt `attempts` (1-based) failed, the next is due after this.
pub fn backoff_ms(base_ms: i64, attempts: i64) -> i64 {
    let doublings = (attempts - 1).clamp(0, 30) as u32;
    base_ms.max(1).saturating_mul(1 << doublings).min(MAX_BACKOFF_MS)
}

/// Posts every due delivery once; returns how many were delivered.
pub async fn deliver_due(state: &AppState, http: &reqwest::Client) -> anyhow::Result<usize> {
    let now = crate::now_ms();
    let mut delivered = 0;
    for d in state.db.due_webhook_deliveries(now, 32).await? {
        if !state.db.claim_webhook_delivery(d.id, now, now + LEASE_MS).await? {
            continue;
        }
        let end = attempt(http, &d).await;
        let at = crate::now_ms();
        let attempts = d.attempts + 1;
        let end = match end {
            Ok((status, answer)) if (200..300).contains(&status) => {
                delivered += 1;
                metrics::counter!("gatehouse_webhook_deliveries_total", "outcome" => "delivered")
                    .increment(1);
                state
                    .db
                    .finish_webhook_attempt(
                        d.id,
                        at,
                        AttemptEnd::Delivered { status, answer: &answer },
                    )
                    .await?;
                continue;
            }
            Ok((status, answer)) => (Some(status), answer),
            Err(e) => (None, e),
        };
        let next = (attempts < state.config.webhook_max_attempts)
            .then(|| at + backoff_ms(state.config.webhook_retry_base_ms, attempts));
        metrics::counter!("gatehouse_webhook_deliveries_total", "outcome" => if next.is_some() { "retry" } else { "failed" })
            .increment(1);
        tracing::warn!(delivery = d.id, url = %d.url, attempts, status = ?end.0, answer = %end.1, "webhook attempt failed");
        state
            .db
            .finish_webhook_attempt(
                d.id,
                at,
                AttemptEnd::Failed { status: end.0, answer: &end.1, next_attempt_at: next },
            )
            .await?;
    }
    Ok(delivered)
}

/// One signed POST of `d`: the answer's status and the start of its body,
/// or why there was no answer.
async fn attempt(http: &reqwest::Client, d: &WebhookDelivery) -> Result<(i64, String), String> {
    let timestamp = crate::now_ms() / 1000;
    let signature = sign(&d.secret, &d.message_id, timestamp, &d.payload)
        .ok_or_else(|| "the endpoint's secret is not whsec_ and base64".to_string())?;
    let r = http
        .post(&d.url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header("webhook-id", &d.message_id)
        .header("webhook-timestamp", timestamp.to_string())
        .header("webhook-signature", signature)
        .body(d.payload.clone())
        .send()
        .await
        .map_err(|e| format!("not reached: {e}"))?;
    let status = i64::from(r.status().as_u16());
    let body = r.bytes().await.unwrap_or_default();
    let mut answer = String::from_utf8_lossy(&body[..body.len().min(ANSWER_KEPT)]).into_owned();
    if body.len() > ANSWER_KEPT {
        answer.push('…');
    }
    Ok((status, answer))
}

/// Runs [`deliver_due`] every `webhook_poll_ms` until the app stops.
pub fn spawn(state: AppState) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap_or_default();
        let every = Duration::from_millis(state.config.webhook_poll_ms.max(10));
        loop {
            if let Err(e) = deliver_due(&state, &http).await {
                tracing::warn!("webhook deliveries: {e:#}");
            }
            tokio::time::sleep(every).await;
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signs_as_the_specification_s_example() {
        // The example of the Standard Webhooks specification.
        let sig = sign(
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1614265330,
            r#"{"test": 2432232314}"#,
        );
        assert_eq!(sig.as_deref(), Some("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="));
        assert_eq!(sign("whsec_not base64!", "msg", 1, "{}"), None);
    }

    #[test]
    fn waits_double_from_the_base_up_to_an_hour() {
        let check = |attempts, expect| assert_eq!(backoff_ms(5_000, attempts), expect);
        check(1, 5_000);
        check(2, 10_000);
        check(4, 40_000);
        check(12, MAX_BACKOFF_MS);
        check(100, MAX_BACKOFF_MS);
    }

    #[test]
    fn event_names_round_trip() {
        for e in Event::ALL {
            assert_eq!(Event::parse(e.as_str()), Some(e));
        }
        assert_eq!(Event::parse("submission.deleted"), None);
    }
}
