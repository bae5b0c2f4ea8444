-- Analysts' rollups, review side: moderators' decision times as a histogram, so the documented
-- "escalation-to-decision time per category" query reads a few thousand rows instead of sorting
-- every resolved escalation (docs/analysts.md, "Rollups"); and a sender-first key for the
-- repeat senders' rollup.
--
-- Kept like 0070's agreement rows: a resolution queues its hour (the review_items trigger of
-- 0070), and the rollup job recomputes each queued hour from the raw rows, now for both tables.

-- Resolved escalations per UTC hour of the decision, category ('none' when null) and bucket of
-- the decision time (resolved_at - created_at, in 0070's latency buckets: 2^(1/8) steps from
-- 1 ms to 12.4 days). Rows resolved without a resolved_at have no decision time and are left out.
CREATE TABLE rollup_review_latency_hourly (
    hour              timestamptz NOT NULL,
    category          text        NOT NULL,
    bucket            smallint    NOT NULL REFERENCES rollup_latency_buckets (bucket),
    decided           bigint      NOT NULL,
    PRIMARY KEY (hour, category, bucket)
);

-- 0070's function, now recomputing the decision-time histogram of the hours too.
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
    WHERE v.model_version IS NOT NULL
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
    WHERE i.resolved_at IS NOT NULL
    GROUP BY 1, 2, 3;
END;
$$;

-- The escalations resolved before this migration.
SELECT modstream_agreement_recompute(ARRAY(
    SELECT DISTINCT date_trunc('hour', coalesce(resolved_at, created_at), 'UTC')
    FROM review_items WHERE status = 'resolved'));

-- Decision times per category over the rollups' history; percentiles as in
-- analytics_verdict_latency_daily (the bucket holding the nearest-rank percentile, +-4.4 %).
CREATE VIEW analytics_review_decision_times AS
WITH per_bucket AS (
    SELECT category, bucket, sum(decided) AS decided
    FROM rollup_review_latency_hourly
    GROUP BY category, bucket
),
running AS (
    SELECT p.*, b.estimate_ms,
           sum(p.decided) OVER (PARTITION BY p.category ORDER BY p.bucket) AS below,
           sum(p.decided) OVER (PARTITION BY p.category)                   AS total
    FROM per_bucket AS p
    JOIN rollup_latency_buckets AS b USING (bucket)
)
SELECT category,
       max(total)::bigint                                                             AS decided,
       (array_agg(estimate_ms ORDER BY bucket) FILTER (WHERE below >= 0.5 * total))[1] / 1000
                                                                                      AS p50_s,
       (array_agg(estimate_ms ORDER BY bucket) FILTER (WHERE below >= 0.95 * total))[1] / 1000
                                                                                      AS p95_s,
       max(estimate_ms) / 1000                                                        AS max_s
FROM running
GROUP BY category;

-- The histogram itself, per UTC day of the decision, for spans of an analyst's choosing.
CREATE VIEW analytics_review_decision_times_daily AS
SELECT (r.hour AT TIME ZONE 'UTC')::date AS day, r.category, r.bucket,
       b.lower_ms / 1000 AS lower_s, b.upper_ms / 1000 AS upper_s, b.estimate_ms / 1000 AS estimate_s,
       sum(r.decided)::bigint AS decided
FROM rollup_review_latency_hourly AS r
JOIN rollup_latency_buckets AS b USING (bucket)
GROUP BY 1, 2, 3, 4, 5, 6;

-- Repeat senders (example query 10) are ranked by sender over a month of days: keyed by sender
-- first and carrying its counts, the table is read in sender order from its index alone, where
-- 0070's day-first key made PostgreSQL sort a month of rows (200 against 450 ms at 20 million
-- verdicts, BENCHMARKS.md). Upserts name the same columns, so nothing else changes.
ALTER TABLE rollup_sender_flags_daily
    DROP CONSTRAINT rollup_sender_flags_daily_pkey,
    ADD PRIMARY KEY (sender_id, group_id, day) INCLUDE (blocked, flagged);

ALTER TABLE rollup_review_latency_hourly OWNER TO modstream_owner;
ALTER VIEW analytics_review_decision_times OWNER TO modstream_owner;
ALTER VIEW analytics_review_decision_times_daily OWNER TO modstream_owner;
GRANT SELECT ON analytics_review_decision_times, analytics_review_decision_times_daily
    TO modstream_analyst;
