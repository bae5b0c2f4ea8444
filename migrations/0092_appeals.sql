-- Appeals (review/appeals.py, review/appeal_outcomes.py, docs in README "Appeals" and
-- docs/analysts.md). A platform files an appeal against a verdict or a moderator's decision, over
-- the review API or the Kafka topic `moderation.appeals`; it opens a review item in the
-- `appeals` queue, decided (upheld / reversed, with a reason) by someone other than the
-- moderator whose decision is appealed; a reversal lifts the strikes that decision gave, and
-- the outcome goes to `moderation.decisions` as a correction naming the original.

-- The appeal's own review item sits at source coordinates of its own, like online verdicts
-- (0040): source_topic 'appeals', partition 0, offset from this sequence. The item of the
-- appealed message keeps its coordinates (and its resolution); no Kafka record of any topic
-- the worker reads is called 'appeals', so rescans and the worker never touch these items.
CREATE SEQUENCE appeal_offsets AS bigint MINVALUE 0 START WITH 0;

ALTER TABLE review_items DROP CONSTRAINT review_items_queue_check;
ALTER TABLE review_items ADD CONSTRAINT review_items_queue_check
    CHECK (queue IN ('moderator', 'admin', 'appeals'));

CREATE TABLE appeals (
    id                   bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- what URLs, answers and records name the appeal by
    public_id            uuid        NOT NULL UNIQUE DEFAULT gen_random_uuid(),
    -- the platform's own id for the appeal: filing it again is a replay, not a new appeal
    appeal_key           text        NOT NULL UNIQUE CHECK (length(appeal_key) BETWEEN 1 AND 128),
    channel              text        NOT NULL CHECK (channel IN ('api', 'kafka')),
    filed_by             text        NOT NULL,
    appellant_id         text        NOT NULL CHECK (length(appellant_id) BETWEEN 1 AND 128),
    -- the appellant's words: shown to the holder of the appeal's claim, never logged, never in
    -- an analyst's view; retention clears it with the message texts
    statement            text        NOT NULL,
    statement_cleared_at timestamptz,
    -- the appealed verdict (one appeal per verdict, ever)
    source_topic         text        NOT NULL,
    source_partition     integer     NOT NULL,
    source_offset        bigint      NOT NULL,
    sent_at              timestamptz NOT NULL,
    message_id           text        NOT NULL,
    group_id             text        NOT NULL,
    sender_id            text        NOT NULL,
    category             text,
    -- what decided it: the verdict (decided_by rules / model / pending_model, decision flag /
    -- block) or a moderator (decided_by 'moderator', decision the action, with the decision id
    -- published on moderation.decisions and the review item it resolved)
    original_decision    text        NOT NULL,
    original_decided_by  text        NOT NULL
        CHECK (original_decided_by IN ('rules', 'model', 'pending_model', 'moderator')),
    original_moderator   text,
    original_decision_id uuid,
    original_item_id     bigint      REFERENCES review_items (id),
    review_item_id       bigint      NOT NULL UNIQUE REFERENCES review_items (id),
    status               text        NOT NULL DEFAULT 'open'
        CHECK (status IN ('open', 'upheld', 'reversed')),
    outcome_reason       text,
    decided_by           text,
    decided_at           timestamptz,
    correction_id        uuid,
    strikes_lifted       integer     NOT NULL DEFAULT 0 CHECK (strikes_lifted >= 0),
    filed_at             timestamptz NOT NULL DEFAULT now(),
    due_at               timestamptz NOT NULL,
    UNIQUE (source_topic, source_partition, source_offset),
    CHECK ((original_decided_by = 'moderator') = (original_moderator IS NOT NULL)),
    CHECK ((status = 'open') = (decided_at IS NULL)),
    CHECK ((status = 'open') = (decided_by IS NULL)),
    -- A different moderator than the one who decided: enforced here as well as in the service.
    CHECK (decided_by IS DISTINCT FROM original_moderator OR decided_by IS NULL)
);

CREATE INDEX appeals_waiting_idx ON appeals (due_at) WHERE status = 'open';
CREATE INDEX appeals_original_moderator_idx ON appeals (original_moderator, category)
    WHERE original_moderator IS NOT NULL;
CREATE INDEX appeals_decision_id_idx ON appeals (original_decision_id)
    WHERE original_decision_id IS NOT NULL;
CREATE INDEX appeals_decided_at_idx ON appeals (decided_at) WHERE status <> 'open';

-- A reversal lifts the strikes the appealed decision gave: they stop counting at once
-- (expires_at moves to now, so every reader of live totals and of totals at a time agrees) and
-- say which appeal lifted them.
ALTER TABLE sender_strikes
    ADD COLUMN lifted_at        timestamptz,
    ADD COLUMN lifted_by_appeal bigint REFERENCES appeals (id);

-- Moderator decisions are found by the decision id their record carries.
CREATE INDEX review_events_decision_id_idx ON review_events ((details ->> 'decision_id'))
    WHERE details ? 'decision_id';

-- The review service opens an appeal's item through this function only: it never inserts
-- review items itself (it cannot fabricate an escalation), and the item it opens is always in
-- the appeals queue at the appeals' own coordinates.
CREATE FUNCTION modstream_open_appeal_item(
    p_sent_at timestamptz, p_message_id text, p_group_id text, p_sender_id text,
    p_message_text text, p_category text, p_priority real, p_auto_decision text,
    p_reasons text[])
RETURNS TABLE (id bigint, public_id uuid, created_at timestamptz)
LANGUAGE sql AS $$
    INSERT INTO review_items AS r (source_topic, source_partition, source_offset, sent_at,
                                   message_id, group_id, sender_id, message_text, category,
                                   priority, auto_decision, reasons, queue)
    VALUES ('appeals', 0, nextval('appeal_offsets'), p_sent_at, p_message_id, p_group_id,
            p_sender_id, p_message_text, p_category, p_priority, p_auto_decision, p_reasons,
            'appeals')
    RETURNING r.id, r.public_id, r.created_at
$$;

ALTER TABLE appeals OWNER TO modstream_owner;
ALTER SEQUENCE appeal_offsets OWNER TO modstream_owner;
ALTER FUNCTION modstream_open_appeal_item(timestamptz, text, text, text, text, text, real, text,
                                          text[]) OWNER TO modstream_owner;
ALTER FUNCTION modstream_open_appeal_item(timestamptz, text, text, text, text, text, real, text,
                                          text[])
    SECURITY DEFINER SET search_path = public, pg_temp;
REVOKE ALL ON FUNCTION modstream_open_appeal_item(timestamptz, text, text, text, text, text, real,
                                                  text, text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION modstream_open_appeal_item(timestamptz, text, text, text, text, text,
                                                      real, text, text[]) TO modstream_review;

-- The review service files appeals (API and the moderation.appeals consumer), opens their items
-- (through modstream_open_appeal_item above), decides them and lifts strikes; it reads the verdict fields an appeal copies as evidence, and
-- records appeals it cannot take in dead_letters (the record itself goes to the DLQ topic).
GRANT SELECT, INSERT ON appeals TO modstream_review;
GRANT UPDATE (status, outcome_reason, decided_by, decided_at, correction_id, strikes_lifted)
    ON appeals TO modstream_review;
GRANT SELECT (escalated, priority) ON verdicts TO modstream_review;
GRANT UPDATE (expires_at, lifted_at, lifted_by_appeal) ON sender_strikes TO modstream_review;
GRANT INSERT ON dead_letters TO modstream_review;

-- Escalation analytics stay about escalations: an appeal's item is not one. Decision times per
-- category (0071's histogram) leave appeal items out; appeals have views of their own below.
CREATE OR REPLACE FUNCTION modstream_agreement_recompute(p_hours timestamptz[])
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM rollup_model_agreement_hourly WHERE hour = ANY (p_hours);
    INSERT INTO rollup_model_agreement_hourly
        (hour, model_name, model_version, category, decided, agreed, model_harsher, model_softer)
    SELECT h.hour, coalesce(v.model_name, ''), v.model_version, coalesce(i.category, 'none'),
           count(*),
           count(*) FILTER (WHERE (v.decision <> 'allow') = (i.resolution <> 'approve')),
           count(*) FILTER (WHERE v.decision <> 'allow' AND i.resolution = 'approve'),
           count(*) FILTER (WHERE v.decision = 'allow' AND i.resolution <> 'approve')
    FROM (SELECT DISTINCT hour FROM unnest(p_hours) AS hour) AS h
    JOIN review_items AS i
      ON i.status = 'resolved' AND coalesce(i.resolved_at, i.created_at) >= h.hour
     AND coalesce(i.resolved_at, i.created_at) < h.hour + interval '1 hour'
    JOIN verdicts AS v
      ON v.source_topic = i.source_topic AND v.source_partition = i.source_partition
     AND v.source_offset = i.source_offset AND v.sent_at = i.sent_at
    WHERE v.model_version IS NOT NULL AND i.queue <> 'appeals'
    GROUP BY 1, 2, 3, 4;

    DELETE FROM rollup_review_latency_hourly WHERE hour = ANY (p_hours);
    INSERT INTO rollup_review_latency_hourly (hour, category, bucket, decided)
    SELECT h.hour, coalesce(i.category, 'none'),
           modstream_latency_bucket(date_part('epoch', i.resolved_at - i.created_at) * 1000),
           count(*)
    FROM (SELECT DISTINCT hour FROM unnest(p_hours) AS hour) AS h
    JOIN review_items AS i
      ON i.status = 'resolved' AND coalesce(i.resolved_at, i.created_at) >= h.hour
     AND coalesce(i.resolved_at, i.created_at) < h.hour + interval '1 hour'
    WHERE i.resolved_at IS NOT NULL AND i.queue <> 'appeals'
    GROUP BY 1, 2, 3;
END;
$$;

CREATE OR REPLACE VIEW analytics_review_latency_daily AS
SELECT (resolved_at AT TIME ZONE 'UTC')::date AS day,
       COALESCE(category, 'none')             AS category,
       count(*)                               AS decided,
       percentile_cont(0.5) WITHIN GROUP (
           ORDER BY EXTRACT(EPOCH FROM resolved_at - created_at))  AS p50_s,
       percentile_cont(0.95) WITHIN GROUP (
           ORDER BY EXTRACT(EPOCH FROM resolved_at - created_at))  AS p95_s,
       max(EXTRACT(EPOCH FROM resolved_at - created_at))           AS max_s,
       percentile_cont(0.5) WITHIN GROUP (
           ORDER BY EXTRACT(EPOCH FROM resolved_at - sent_at))     AS p50_message_to_decision_s
FROM review_items
WHERE status = 'resolved' AND queue <> 'appeals'
GROUP BY 1, 2;

CREATE OR REPLACE VIEW analytics_severe_harm_review AS
SELECT category,
       count(*) FILTER (WHERE status IN ('open', 'claimed'))                AS waiting,
       count(*) FILTER (WHERE status = 'resolved')                          AS resolved,
       count(*) FILTER (WHERE status = 'resolved' AND resolution <> 'approve') AS actioned,
       count(*) FILTER (WHERE status = 'resolved' AND resolution = 'approve')  AS approved,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY EXTRACT(EPOCH FROM resolved_at - created_at))
           FILTER (WHERE status = 'resolved')                               AS p50_decision_s,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY EXTRACT(EPOCH FROM resolved_at - created_at))
           FILTER (WHERE status = 'resolved')                               AS p95_decision_s,
       max(EXTRACT(EPOCH FROM now() - created_at)) FILTER (WHERE status IN ('open', 'claimed'))
                                                                            AS oldest_waiting_s
FROM review_items
WHERE category = ANY (modstream_severe_categories()) AND queue <> 'appeals'
GROUP BY category;

-- Every appeal, without the appellant's statement or the moderator's reason.
CREATE VIEW analytics_appeals AS
SELECT a.id, a.public_id, a.channel, a.filed_at, a.due_at, a.message_id, a.group_id,
       a.sender_id, a.appellant_id, COALESCE(a.category, 'none') AS category,
       a.original_decision, a.original_decided_by, a.original_moderator,
       a.status, a.decided_by, a.decided_at, a.strikes_lifted,
       EXTRACT(EPOCH FROM a.decided_at - a.filed_at)::double precision AS decision_s,
       CASE WHEN a.status = 'open' THEN a.due_at < now()
            ELSE a.decided_at > a.due_at END AS overdue
FROM appeals a;

-- Appeal and reversal rates per category. Moderators' decisions are the resolved escalations
-- with an action against the message (anything but approve); automatic ones are the flag and
-- block verdicts of the rollups (as fresh as their last refresh, kept --keep-rollups). A
-- verdict a moderator then decided counts in both, its appeal once: against the moderator.
CREATE VIEW analytics_appeal_rates AS
WITH moderated AS (
    SELECT COALESCE(category, 'none') AS category, count(*) AS decisions
    FROM review_items
    WHERE status = 'resolved' AND queue <> 'appeals' AND resolution <> 'approve'
    GROUP BY 1
),
automatic AS (
    SELECT category, sum(verdicts) AS decisions
    FROM rollup_verdict_totals_hourly
    WHERE decision IN ('flag', 'block')
    GROUP BY 1
),
appealed AS (
    SELECT COALESCE(category, 'none') AS category,
           count(*) FILTER (WHERE original_decided_by = 'moderator') AS moderator_appeals,
           count(*) FILTER (WHERE original_decided_by <> 'moderator') AS automatic_appeals,
           count(*) FILTER (WHERE status = 'open')                    AS waiting,
           count(*) FILTER (WHERE status = 'open' AND due_at < now()) AS overdue,
           count(*) FILTER (WHERE status = 'upheld')                  AS upheld,
           count(*) FILTER (WHERE status = 'reversed')                AS reversed
    FROM appeals
    GROUP BY 1
)
SELECT c.category,
       COALESCE(m.decisions, 0)::bigint                  AS moderator_decisions,
       COALESCE(p.moderator_appeals, 0)::bigint          AS moderator_appeals,
       COALESCE(p.moderator_appeals::double precision / NULLIF(m.decisions, 0), 0)
                                                         AS moderator_appeal_rate,
       COALESCE(a.decisions, 0)::bigint                  AS automatic_decisions,
       COALESCE(p.automatic_appeals, 0)::bigint          AS automatic_appeals,
       COALESCE(p.automatic_appeals::double precision / NULLIF(a.decisions, 0), 0)
                                                         AS automatic_appeal_rate,
       COALESCE(p.waiting, 0)::bigint                    AS waiting,
       COALESCE(p.overdue, 0)::bigint                    AS overdue,
       COALESCE(p.upheld, 0)::bigint                     AS upheld,
       COALESCE(p.reversed, 0)::bigint                   AS reversed,
       COALESCE(p.reversed::double precision / NULLIF(p.upheld + p.reversed, 0), 0)
                                                         AS reversal_rate
FROM (SELECT category FROM moderated UNION SELECT category FROM automatic
      UNION SELECT category FROM appealed) AS c
LEFT JOIN moderated AS m USING (category)
LEFT JOIN automatic AS a USING (category)
LEFT JOIN appealed AS p USING (category);

-- The same per moderator whose decisions were appealed (never a metric label: moderators are
-- unbounded, so these figures live here only).
CREATE VIEW analytics_appeal_rates_by_moderator AS
WITH moderated AS (
    SELECT resolved_by AS moderator, COALESCE(category, 'none') AS category,
           count(*) AS decisions
    FROM review_items
    WHERE status = 'resolved' AND queue <> 'appeals' AND resolution <> 'approve'
      AND resolved_by IS NOT NULL
    GROUP BY 1, 2
),
appealed AS (
    SELECT original_moderator AS moderator, COALESCE(category, 'none') AS category,
           count(*)                                   AS appeals,
           count(*) FILTER (WHERE status = 'upheld')   AS upheld,
           count(*) FILTER (WHERE status = 'reversed') AS reversed
    FROM appeals
    WHERE original_moderator IS NOT NULL
    GROUP BY 1, 2
)
SELECT moderator, category,
       COALESCE(m.decisions, 0)::bigint AS decisions,
       COALESCE(p.appeals, 0)::bigint   AS appeals,
       COALESCE(p.appeals::double precision / NULLIF(m.decisions, 0), 0) AS appeal_rate,
       COALESCE(p.upheld, 0)::bigint    AS upheld,
       COALESCE(p.reversed, 0)::bigint  AS reversed,
       COALESCE(p.reversed::double precision / NULLIF(p.upheld + p.reversed, 0), 0)
                                        AS reversal_rate
FROM moderated AS m
FULL JOIN appealed AS p USING (moderator, category);

-- Each review queue's backlog per category, with the appeals' deadlines (the escalation
-- queues' targets are service settings: /metrics exports them beside the oldest item).
CREATE VIEW analytics_review_queues AS
SELECT r.queue, COALESCE(r.category, 'none') AS category,
       count(*) FILTER (WHERE NOT (r.status = 'claimed' AND r.claim_expires_at > now()))
           AS open,
       count(*) FILTER (WHERE r.status = 'claimed' AND r.claim_expires_at > now()) AS claimed,
       max(EXTRACT(EPOCH FROM now() - r.created_at))::double precision AS oldest_age_s,
       count(a.id) FILTER (WHERE a.due_at < now())   AS overdue,
       min(a.due_at)                                 AS next_due_at
FROM review_items r
LEFT JOIN appeals a ON a.review_item_id = r.id
WHERE r.status IN ('open', 'claimed')
GROUP BY 1, 2;

ALTER VIEW analytics_appeals OWNER TO modstream_owner;
ALTER VIEW analytics_appeal_rates OWNER TO modstream_owner;
ALTER VIEW analytics_appeal_rates_by_moderator OWNER TO modstream_owner;
ALTER VIEW analytics_review_queues OWNER TO modstream_owner;
GRANT SELECT ON analytics_appeals, analytics_appeal_rates, analytics_appeal_rates_by_moderator,
    analytics_review_queues TO modstream_analyst;
