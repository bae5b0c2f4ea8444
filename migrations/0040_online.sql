-- Online mode (`modstream online`, online/): a chat server asks for a verdict over gRPC before it
-- delivers a message. Those verdicts are stored in `verdicts` exactly like the stream's, at
-- source coordinates of their own (docs/online.md):
--
--   source_topic 'online', source_partition 0, source_offset = nextval('online_offsets')
--
-- so every reader of `verdicts` (review queue, re-scoring, outbox relay, analysts) handles them
-- unchanged, and no offset can collide with a Kafka record (no topic is called `online`).
-- `online_messages` gives a message_id its one offset: the first call claims it, a repeated call
-- (concurrent or later, on any instance) finds the claim and answers with the stored verdict.
CREATE SEQUENCE online_offsets AS bigint MINVALUE 0 START WITH 0;

CREATE TABLE online_messages (
    message_id        text        PRIMARY KEY CHECK (length(message_id) BETWEEN 1 AND 128),
    source_offset     bigint      NOT NULL UNIQUE,
    -- the first call's sent_at: part of the verdict row's key (verdicts is partitioned on it)
    sent_at           timestamptz NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX online_messages_created_at_idx ON online_messages (created_at);

-- Chat servers authenticate with API tokens of the review service's users (only the SHA-256 is
-- stored): `modstream review add-user chat-server --role platform`. The review service refuses
-- platform tokens; the online service accepts only them.
ALTER TABLE review_users DROP CONSTRAINT review_users_role_check;
ALTER TABLE review_users ADD CONSTRAINT review_users_role_check
    CHECK (role IN ('moderator', 'admin', 'platform'));

-- Least privilege (0020): the online service is a worker that also claims message ids and looks
-- up tokens. Its group role gets the worker's grants by membership.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'modstream_online') THEN
        BEGIN
            CREATE ROLE modstream_online NOLOGIN;
        EXCEPTION WHEN duplicate_object OR unique_violation THEN
            NULL;
        END;
    END IF;
    EXECUTE format('GRANT CONNECT ON DATABASE %I TO modstream_online', current_database());
END;
$$;

ALTER TABLE online_messages OWNER TO modstream_owner;
ALTER SEQUENCE online_offsets OWNER TO modstream_owner;

GRANT modstream_worker TO modstream_online;
GRANT SELECT, INSERT ON online_messages TO modstream_online;
GRANT USAGE ON SEQUENCE online_offsets TO modstream_online;
GRANT SELECT (id, name, role, categories, token_sha256, disabled_at) ON review_users
    TO modstream_online;
