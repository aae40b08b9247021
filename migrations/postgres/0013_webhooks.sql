-- Signed webhooks (issue #31, part 3), per the Standard Webhooks
-- specification: an admin registers an endpoint (a URL, the events it
-- wants, a secret generated here), and each event is written to an outbox,
-- one delivery per subscribed endpoint, which the server's deliverer posts,
-- signed, retrying with exponential backoff. A delivery is a row, so it
-- survives a restart; its `message_id` is the `webhook-id` header, the
-- same on every attempt and redelivery (receivers deduplicate by it).
CREATE TABLE webhook_endpoints (
    id          BIGSERIAL PRIMARY KEY,
    url         TEXT NOT NULL,
    -- `whsec_` and the base64 of the key: the deliverer signs with it.
    secret      TEXT NOT NULL,
    -- The event types it receives, space-separated.
    events      TEXT NOT NULL,
    created_by  BIGINT REFERENCES users (id),
    created_at  BIGINT NOT NULL,
    disabled_at BIGINT
);

CREATE TABLE webhook_deliveries (
    id              BIGSERIAL PRIMARY KEY,
    endpoint_id     BIGINT NOT NULL REFERENCES webhook_endpoints (id),
    message_id      TEXT NOT NULL,
    event           TEXT NOT NULL,
    payload         TEXT NOT NULL,
    state           TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts        BIGINT NOT NULL DEFAULT 0,
    next_attempt_at BIGINT NOT NULL,
    -- Held while an attempt is in flight; an attempt whose deliverer died
    -- is made again once it passes.
    lease_until     BIGINT,
    last_status     BIGINT,
    last_answer     TEXT,
    created_at      BIGINT NOT NULL,
    delivered_at    BIGINT,
    UNIQUE (endpoint_id, message_id)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (state, next_attempt_at);
