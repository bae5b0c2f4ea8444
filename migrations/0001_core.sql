-- Core schema: verdicts (partitioned by month of sent_at), dead letters, review queue, offsets.
-- The worker writes verdicts, dead letters, review items and offsets in ONE transaction per batch.

-- One row per source record that got a verdict. The idempotency key is the Kafka coordinates;
-- sent_at is part of the primary key because the table is partitioned on it (a redelivered
-- record carries the same sent_at, so it lands in the same partition and collides).
CREATE TABLE verdicts (
    source_topic      text        NOT NULL,
    source_partition  integer     NOT NULL,
    source_offset     bigint      NOT NULL,
    sent_at           timestamptz NOT NULL,
    message_id        text        NOT NULL,
    group_id          text        NOT NULL,
    sender_id         text        NOT NULL,
    text_sha256       text        NOT NULL,
    decision          text        NOT NULL CHECK (decision IN ('allow', 'flag', 'block')),
    decided_by        text        NOT NULL CHECK (decided_by IN ('rules', 'model', 'pending_model')),
    escalated         boolean     NOT NULL DEFAULT false,
    category          text,
    priority          real        NOT NULL DEFAULT 0,
    reasons           text[]      NOT NULL DEFAULT '{}',
    rule_hits         jsonb       NOT NULL DEFAULT '[]',
    -- per-task probabilities: {"sentiment": {"negative": 0.1, ...}, "intent": {...}, "toxicity": {...}}
    scores            jsonb,
    sentiment_label   text,
    intent_label      text,
    toxicity_label    text,
    model_name        text,
    model_version     text,
    batch_id          uuid,
    queue_ms          real        NOT NULL DEFAULT 0,
    inference_ms      real,
    published         boolean     NOT NULL DEFAULT false,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source_topic, source_partition, source_offset, sent_at)
) PARTITION BY RANGE (sent_at);

-- Rows whose sent_at has no monthly partition (far past or future clocks) land here.
CREATE TABLE verdicts_default PARTITION OF verdicts DEFAULT;

CREATE INDEX verdicts_created_at_idx ON verdicts (created_at);
CREATE INDEX verdicts_group_idx ON verdicts (group_id, sent_at);
CREATE INDEX verdicts_sender_idx ON verdicts (sender_id, sent_at);
CREATE INDEX verdicts_message_idx ON verdicts (message_id);
CREATE INDEX verdicts_pending_model_idx ON verdicts (created_at) WHERE decided_by = 'pending_model';
CREATE INDEX verdicts_unpublished_idx ON verdicts (created_at) WHERE NOT published;

-- Creates the monthly partitions covering [p_from, p_from + p_months months). Idempotent; a month
-- whose rows already sit in the default partition is skipped with a notice rather than failing.
CREATE FUNCTION modstream_ensure_verdict_partitions(p_from date, p_months integer)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    month_start date := date_trunc('month', p_from)::date;
    part_name   text;
    created     integer := 0;
BEGIN
    FOR i IN 0 .. p_months - 1 LOOP
        part_name := format('verdicts_%s', to_char(month_start, 'YYYY_MM'));
        IF to_regclass(part_name) IS NULL THEN
            BEGIN
                EXECUTE format(
                    'CREATE TABLE %I PARTITION OF verdicts FOR VALUES FROM (%L) TO (%L)',
                    part_name, month_start, (month_start + interval '1 month')::date);
                created := created + 1;
            EXCEPTION WHEN check_violation THEN
                RAISE NOTICE 'partition % skipped: rows for it are in verdicts_default', part_name;
            END;
        END IF;
        month_start := (month_start + interval '1 month')::date;
    END LOOP;
    RETURN created;
END;
$$;

SELECT modstream_ensure_verdict_partitions((now() - interval '1 month')::date, 4);

-- Records that could not be decoded: the exact ledger (the Kafka DLQ topic is at-least-once).
CREATE TABLE dead_letters (
    source_topic      text        NOT NULL,
    source_partition  integer     NOT NULL,
    source_offset     bigint      NOT NULL,
    reason_code       text        NOT NULL,
    reason            text        NOT NULL,
    value_bytes       integer     NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source_topic, source_partition, source_offset)
);

-- Escalations waiting for (or resolved by) a human. Holds the message text, because a moderator
-- must read it; verdicts never do.
CREATE TABLE review_items (
    id                bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    source_topic      text        NOT NULL,
    source_partition  integer     NOT NULL,
    source_offset     bigint      NOT NULL,
    sent_at           timestamptz NOT NULL,
    message_id        text        NOT NULL,
    group_id          text        NOT NULL,
    sender_id         text        NOT NULL,
    message_text      text        NOT NULL,
    category          text,
    priority          real        NOT NULL DEFAULT 0,
    auto_decision     text        NOT NULL,
    reasons           text[]      NOT NULL DEFAULT '{}',
    status            text        NOT NULL DEFAULT 'open'
                                  CHECK (status IN ('open', 'claimed', 'resolved')),
    claimed_by        text,
    claim_expires_at  timestamptz,
    resolution        text,
    resolved_by       text,
    resolved_at       timestamptz,
    created_at        timestamptz NOT NULL DEFAULT now(),
    UNIQUE (source_topic, source_partition, source_offset)
);

CREATE INDEX review_items_queue_idx ON review_items (priority DESC, created_at)
    WHERE status <> 'resolved';

-- Append-only audit of every moderator action.
CREATE TABLE review_events (
    id                bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    review_item_id    bigint      NOT NULL REFERENCES review_items (id),
    actor             text        NOT NULL,
    action            text        NOT NULL,
    reason            text,
    details           jsonb       NOT NULL DEFAULT '{}',
    created_at        timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX review_events_item_idx ON review_events (review_item_id, created_at);

-- The next offset to read per partition, written in the same transaction as the verdicts:
-- the worker seeks here on assignment, so Postgres, not Kafka, is the source of truth.
CREATE TABLE consumer_offsets (
    consumer_group    text        NOT NULL,
    topic             text        NOT NULL,
    partition         integer     NOT NULL,
    next_offset       bigint      NOT NULL,
    updated_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer_group, topic, partition)
);
