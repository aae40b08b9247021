//! `WebhookStore` for both backends, written once.

macro_rules! webhook_store {
    ($store:ty) => {
        use async_trait::async_trait;

        use crate::db::webhooks::{AttemptEnd, WebhookDelivery, WebhookEndpoint, WebhookStore};
        use crate::db::DbResult;
        use crate::now_ms;

        const ENDPOINT_COLS: &str = "id, url, secret, events, created_by, created_at, disabled_at";
        const DELIVERY_SELECT: &str = "SELECT d.id, d.endpoint_id, e.url, e.secret, d.message_id, d.event, d.payload, d.state,
                d.attempts, d.next_attempt_at, d.last_status, d.last_answer, d.created_at, d.delivered_at
             FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id";

        #[async_trait]
        impl WebhookStore for $store {
            async fn create_webhook_endpoint(&self, url: &str, secret: &str, events: &str, created_by: Option<i64>) -> DbResult<i64> {
                sqlx::query_scalar(
                    "INSERT INTO webhook_endpoints (url, secret, events, created_by, created_at) VALUES ($1, $2, $3, $4, $5) RETURNING id",
                )
                .bind(url)
                .bind(secret)
                .bind(events)
                .bind(created_by)
                .bind(now_ms())
                .fetch_one(&self.pool)
                .await
            }

            async fn list_webhook_endpoints(&self) -> DbResult<Vec<WebhookEndpoint>> {
                sqlx::query_as(&format!("SELECT {ENDPOINT_COLS} FROM webhook_endpoints ORDER BY id DESC")).fetch_all(&self.pool).await
            }

            async fn disable_webhook_endpoint(&self, id: i64) -> DbResult<bool> {
                let r = sqlx::query("UPDATE webhook_endpoints SET disabled_at = $1 WHERE id = $2 AND disabled_at IS NULL")
                    .bind(now_ms())
                    .bind(id)
                    .execute(&self.pool)
                    .await?;
                Ok(r.rows_affected() == 1)
            }

            async fn queue_webhook_event(&self, message_id: &str, event: &str, payload: &str, now: i64) -> DbResult<u64> {
                let r = sqlx::query(
                    "INSERT INTO webhook_deliveries (endpoint_id, message_id, event, payload, next_attempt_at, created_at)
                     SELECT id, $1, $2, $3, $4, $4 FROM webhook_endpoints
                     WHERE disabled_at IS NULL AND (' ' || events || ' ') LIKE $5",
                )
                .bind(message_id)
                .bind(event)
                .bind(payload)
                .bind(now)
                .bind(format!("% {event} %"))
                .execute(&self.pool)
                .await?;
                Ok(r.rows_affected())
            }

            async fn due_webhook_deliveries(&self, now: i64, limit: i64) -> DbResult<Vec<WebhookDelivery>> {
                sqlx::query_as(&format!(
                    "{DELIVERY_SELECT} WHERE d.state = 'pending' AND d.next_attempt_at <= $1
                        AND (d.lease_until IS NULL OR d.lease_until < $1) AND e.disabled_at IS NULL
                     ORDER BY d.next_attempt_at, d.id LIMIT $2"
                ))
                .bind(now)
                .bind(limit)
                .fetch_all(&self.pool)
                .await
            }

            async fn claim_webhook_delivery(&self, id: i64, now: i64, lease_until: i64) -> DbResult<bool> {
                let r = sqlx::query(
                    "UPDATE webhook_deliveries SET lease_until = $1, attempts = attempts + 1
                     WHERE id = $2 AND state = 'pending' AND next_attempt_at <= $3 AND (lease_until IS NULL OR lease_until < $3)",
                )
                .bind(lease_until)
                .bind(id)
                .bind(now)
                .execute(&self.pool)
                .await?;
                Ok(r.rows_affected() == 1)
            }

            async fn finish_webhook_attempt(&self, id: i64, now: i64, end: AttemptEnd<'_>) -> DbResult<()> {
                let (state, status, answer, next, delivered) = match end {
                    AttemptEnd::Delivered { status, answer } => ("delivered", Some(status), answer, now, Some(now)),
                    AttemptEnd::Failed { status, answer, next_attempt_at: Some(at) } => ("pending", status, answer, at, None),
                    AttemptEnd::Failed { status, answer, next_attempt_at: None } => ("failed", status, answer, now, None),
                };
                sqlx::query(
                    "UPDATE webhook_deliveries SET state = $1, last_status = $2, last_answer = $3, next_attempt_at = $4,
                        delivered_at = COALESCE($5, delivered_at), lease_until = NULL
                     WHERE id = $6",
                )
                .bind(state)
                .bind(status)
                .bind(answer)
                .bind(next)
                .bind(delivered)
                .bind(id)
                .execute(&self.pool)
                .await?;
                Ok(())
            }

            async fn recent_webhook_deliveries(&self, limit: i64) -> DbResult<Vec<WebhookDelivery>> {
                sqlx::query_as(&format!("{DELIVERY_SELECT} ORDER BY d.id DESC LIMIT $1")).bind(limit).fetch_all(&self.pool).await
            }

            async fn webhook_delivery(&self, id: i64) -> DbResult<Option<WebhookDelivery>> {
                sqlx::query_as(&format!("{DELIVERY_SELECT} WHERE d.id = $1")).bind(id).fetch_optional(&self.pool).await
            }

            async fn redeliver_webhook(&self, id: i64, now: i64) -> DbResult<bool> {
                let r = sqlx::query(
                    "UPDATE webhook_deliveries SET state = 'pending', attempts = 0, next_attempt_at = $1
                     WHERE id = $2 AND (lease_until IS NULL OR lease_until < $1)",
                )
                .bind(now)
                .bind(id)
                .execute(&self.pool)
                .await?;
                Ok(r.rows_affected() == 1)
            }

            async fn prune_webhook_deliveries(&self, before: i64) -> DbResult<u64> {
                let r = sqlx::query("DELETE FROM webhook_deliveries WHERE state IN ('delivered', 'failed') AND created_at < $1")
                    .bind(before)
                    .execute(&self.pool)
                    .await?;
                Ok(r.rows_affected())
            }
        }
    };
}

pub(crate) use webhook_store;
