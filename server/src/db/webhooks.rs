//! Webhook endpoints and the outbox of their deliveries (see
//! `crate::webhooks`).

use async_trait::async_trait;
use serde::Serialize;

use super::DbResult;

/// A registered receiver of events.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct WebhookEndpoint {
    pub id: i64,
    pub url: String,
    /// `whsec_<base64 key>`: never shown after creation, used to sign.
    #[serde(skip)]
    pub secret: String,
    /// The event types it receives, space-separated.
    pub events: String,
    pub created_by: Option<i64>,
    pub created_at: i64,
    pub disabled_at: Option<i64>,
}

/// One event's delivery to one endpoint, with the endpoint's URL and
/// secret (read together, for the deliverer and the admin page).
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct WebhookDelivery {
    pub id: i64,
    pub endpoint_id: i64,
    pub url: String,
    pub secret: String,
    pub message_id: String,
    pub event: String,
    pub payload: String,
    /// `pending`, `delivered` or `failed` (attempts used up).
    pub state: String,
    pub attempts: i64,
    pub next_attempt_at: i64,
    pub last_status: Option<i64>,
    pub last_answer: Option<String>,
    pub created_at: i64,
    pub delivered_at: Option<i64>,
}

/// How an attempt ended.
pub enum AttemptEnd<'a> {
    /// The receiver answered 2xx.
    Delivered { status: i64, answer: &'a str },
    /// Not delivered: tried again at `next_attempt_at`, or never again
    /// (`None`: attempts used up).
    Failed { status: Option<i64>, answer: &'a str, next_attempt_at: Option<i64> },
}

#[async_trait]
pub trait WebhookStore {
    async fn create_webhook_endpoint(
        &self,
        url: &str,
        secret: &str,
        events: &str,
        created_by: Option<i64>,
    ) -> DbResult<i64>;
    /// Every endpoint, newest first.
    async fn list_webhook_endpoints(&self) -> DbResult<Vec<WebhookEndpoint>>;
    /// Stops new events reaching endpoint `id` (its deliveries pending stay
    /// listed and are not attempted again). False when there is no such
    /// endpoint or it was already disabled.
    async fn disable_webhook_endpoint(&self, id: i64) -> DbResult<bool>;
    /// Writes one event to the outbox: a delivery to every enabled
    /// endpoint subscribed to `event`, due at `now`. Returns how many.
    async fn queue_webhook_event(
        &self,
        message_id: &str,
        event: &str,
        payload: &str,
        now: i64,
    ) -> DbResult<u64>;
    /// Pending deliveries due at `now` whose endpoint is enabled and which
    /// no attempt holds, oldest first.
    async fn due_webhook_deliveries(&self, now: i64, limit: i64) -> DbResult<Vec<WebhookDelivery>>;
    /// Takes delivery `id` for one attempt until `lease_until`; false when
    /// another deliverer took it first or it is no longer due.
    async fn claim_webhook_delivery(&self, id: i64, now: i64, lease_until: i64) -> DbResult<bool>;
    async fn finish_webhook_attempt(&self, id: i64, now: i64, end: AttemptEnd<'_>) -> DbResult<()>;
    /// The newest deliveries, for the admin page.
    async fn recent_webhook_deliveries(&self, limit: i64) -> DbResult<Vec<WebhookDelivery>>;
    async fn webhook_delivery(&self, id: i64) -> DbResult<Option<WebhookDelivery>>;
    /// Delivery `id` is attempted again now, with the same `webhook-id`
    /// and a fresh schedule of attempts. False when there is no such
    /// delivery or an attempt of it is in flight.
    async fn redeliver_webhook(&self, id: i64, now: i64) -> DbResult<bool>;
    /// Removes deliveries that ended (delivered or failed) and were
    /// created before `before`; returns how many.
    async fn prune_webhook_deliveries(&self, before: i64) -> DbResult<u64>;
}
