-- Review API: moderators and their tokens, console sessions, queues and claims, per-sender
-- strikes, and the outbox that carries decisions to Kafka `moderation.decisions`.

-- People who work the queue. Only the SHA-256 of an API token is stored; the token itself is
-- printed once by `modstream review add-user` and never again.
CREATE TABLE review_users (
    id                bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name              text        NOT NULL UNIQUE CHECK (name ~ '^[A-Za-z0-9_.@-]{1,64}$'),
    role              text        NOT NULL CHECK (role IN ('moderator', 'admin')),
    token_sha256      text        NOT NULL UNIQUE CHECK (length(token_sha256) = 64),
    disabled_at       timestamptz,
    created_at        timestamptz NOT NULL DEFAULT now()
);

-- Web console sign-ins: the cookie holds a random id, the table its SHA-256.
CREATE TABLE review_sessions (
    id_sha256         text        PRIMARY KEY CHECK (length(id_sha256) = 64),
    user_id           bigint      NOT NULL REFERENCES review_users (id) ON DELETE CASCADE,
    csrf_token        text        NOT NULL,
    expires_at        timestamptz NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX review_sessions_expiry_idx ON review_sessions (expires_at);

-- Items escalated to admins leave the moderators' queue; claimed_at dates the current claim.
ALTER TABLE review_items
    ADD COLUMN queue      text NOT NULL DEFAULT 'moderator' CHECK (queue IN ('moderator', 'admin')),
    ADD COLUMN claimed_at timestamptz;

-- A claim whose expiry has passed counts as open: no sweeper is needed, every query says so.
CREATE INDEX review_items_claims_idx ON review_items (claimed_by, claim_expires_at)
    WHERE status = 'claimed';
CREATE INDEX review_items_group_idx ON review_items (group_id, sent_at);
CREATE INDEX review_items_sender_idx ON review_items (sender_id, sent_at);

-- One row per strike a decision gave a sender; a strike counts until expires_at (the decay
-- window). The worker's rules read the live total as `metadata.sender_strikes`.
CREATE TABLE sender_strikes (
    id                bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    sender_id         text        NOT NULL,
    group_id          text        NOT NULL,
    review_item_id    bigint      NOT NULL REFERENCES review_items (id),
    action            text        NOT NULL,
    weight            integer     NOT NULL CHECK (weight > 0),
    created_at        timestamptz NOT NULL DEFAULT now(),
    expires_at        timestamptz NOT NULL
);

CREATE INDEX sender_strikes_sender_idx ON sender_strikes (sender_id, expires_at);

-- Decisions waiting to be (or already) published, written in the decision's transaction so a
-- Kafka outage delays a decision but never loses it. Delivery is at least once: consumers
-- de-duplicate on decision_id.
CREATE TABLE review_decision_outbox (
    decision_id       uuid        PRIMARY KEY,
    review_event_id   bigint      NOT NULL REFERENCES review_events (id),
    message_key       text        NOT NULL,
    payload           jsonb       NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now(),
    published_at      timestamptz,
    attempts          integer     NOT NULL DEFAULT 0
);

CREATE INDEX review_decision_outbox_pending_idx ON review_decision_outbox (created_at)
    WHERE published_at IS NULL;
