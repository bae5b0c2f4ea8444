-- ClickHouse: the verdicts of Kafka `moderation.verdicts`, one row per verdict (its latest
-- record), and the analysts' aggregates as views over them (docs/analysts.md, "ClickHouse").
--
-- The verdict topic carries a verdict's whole current state, not a change: a re-scored or
-- re-scanned verdict is published again under the same Kafka coordinates of its message, and
-- delivery is at least once. So rows are kept by key in a ReplacingMergeTree whose version is the
-- record's offset in the verdict topic (a verdict's records always land in one partition, the
-- topic being keyed by group_id, so a later offset is a later state), and every view reads
-- `FINAL`: each verdict counts once, in its latest state, however often it was published.
-- ClickHouse aggregates tens of millions of such rows in well under a second, so these views need
-- no rollup tables of their own (summing at insert time would count a re-published verdict twice).
--
-- Deletions follow PostgreSQL's (docs/analysts.md, "ClickHouse", retention and erasure):
-- - retention: the table's TTL drops a verdict once its message is older than `modstream retention
--   --keep` (90 days by default; ALTER TABLE moderation_verdicts MODIFY TTL ... when you keep
--   another period), the same rule PostgreSQL applies to `sent_at`. Nothing needs telling: a row
--   past it that arrives late is dropped as it is written or merged.
-- - erasure: a record on Kafka `moderation.erasures` ({"schema_version": 1, "sender_id": ...,
--   "erased_at": ...}, 02_kafka.sql) lands in moderation_erasures; a materialized view then writes
--   a tombstone for each of that sender's verdicts sent until erased_at (the verdict's coordinates
--   and sent_at, nothing that names a person, `erased` = 1, the highest version), which every
--   `FINAL` read skips at
--   once and merges put in place of the verdict, and the Kafka feed drops that sender's records
--   sent until erased_at that arrive later (a lagging consumer, a re-publication). Publishing an
--   erasure again is harmless and covers anything written in the same instant as the first.

CREATE TABLE moderation_verdicts
(
    source_topic      LowCardinality(String),
    source_partition  Int32,
    source_offset     Int64,
    sent_at           DateTime64(6, 'UTC'),
    created_at        DateTime64(6, 'UTC'),
    message_id        String,
    group_id          String,
    sender_id         String,
    decision          LowCardinality(String),
    decided_by        LowCardinality(String),
    escalated         Bool,
    category          LowCardinality(Nullable(String)),
    priority          Float32,
    reasons           Array(String),
    rule_hits         Array(Tuple(rule_id String, category String, severity String, action String)),
    model_name        LowCardinality(Nullable(String)),
    model_version     LowCardinality(Nullable(String)),
    -- the community (docs/tenants.md); a record from before tenants is the default tenant's
    tenant            LowCardinality(String) DEFAULT 'default',
    kafka_partition   UInt32,
    kafka_offset      UInt64,
    erased            UInt8 DEFAULT 0
)
ENGINE = ReplacingMergeTree(kafka_offset, erased)
PARTITION BY toYYYYMM(sent_at)
ORDER BY (source_topic, source_partition, source_offset)
TTL toDateTime(sent_at) + INTERVAL 90 DAY;

-- The senders whose data was erased, and until when (a sender may be erased again later). Kept as
-- long as the verdicts: a verdict sent before an erasure older than that is past the TTL anyway.
CREATE TABLE moderation_erasures
(
    sender_id         String,
    erased_at         DateTime64(6, 'UTC'),
    kafka_partition   UInt32,
    kafka_offset      UInt64
)
ENGINE = ReplacingMergeTree
ORDER BY (sender_id, erased_at)
TTL toDateTime(erased_at) + INTERVAL 90 DAY;

-- A tombstone per erased verdict: its coordinates and sent_at (for the TTL) and nothing that names
-- a person; the highest version, so no later record of that verdict wins over it. It reads the
-- sender_id column of moderation_verdicts once per batch of erasures (they are rare).
CREATE MATERIALIZED VIEW moderation_erasures_tombstones_mv TO moderation_verdicts AS
SELECT v.source_topic AS source_topic, v.source_partition AS source_partition,
       v.source_offset AS source_offset, v.sent_at AS sent_at, v.tenant AS tenant,
       toUInt64(18446744073709551615) AS kafka_offset, toUInt8(1) AS erased
FROM moderation_erasures AS e
INNER JOIN moderation_verdicts AS v ON v.sender_id = e.sender_id
WHERE e.sender_id != '' AND v.sent_at <= e.erased_at AND v.erased = 0;

-- The same bucket edges as PostgreSQL's modstream_latency_bucket (migrations/0070_rollups.sql):
-- 0 below 1 ms, k in 1..240 for [2^((k-1)/8), 2^(k/8)) ms, 241 from 2^30 ms; the estimate is the
-- bucket's geometric middle (within +-4.4 % of the nearest-rank percentile).
CREATE FUNCTION modstream_latency_bucket AS (latency_ms) ->
    if(latency_ms < 1, 0, least(241, 1 + toInt32(floor(8 * log2(latency_ms)))));
CREATE FUNCTION modstream_latency_estimate_ms AS (bucket) ->
    multiIf(bucket = 0, 0., bucket = 241, pow(2., 30), pow(2., (bucket - 0.5) / 8));

CREATE VIEW analytics_verdict_rates_daily AS
SELECT toDate(sent_at) AS day, group_id, ifNull(category, 'none') AS category, decision,
       count() AS verdicts,
       countIf(escalated) AS escalated,
       countIf(decided_by = 'rules') AS by_rules,
       countIf(decided_by = 'model') AS by_model,
       countIf(decided_by = 'pending_model') AS pending_model,
       round(count() / sum(count()) OVER (PARTITION BY day, group_id), 4) AS share_of_group_day
FROM moderation_verdicts FINAL
GROUP BY day, group_id, category, decision;

CREATE VIEW analytics_verdict_totals_daily AS
SELECT toDate(sent_at) AS day, ifNull(category, 'none') AS category, decision,
       count() AS verdicts,
       countIf(escalated) AS escalated,
       countIf(decided_by = 'rules') AS by_rules,
       countIf(decided_by = 'model') AS by_model,
       countIf(decided_by = 'pending_model') AS pending_model
FROM moderation_verdicts FINAL
GROUP BY day, category, decision;

CREATE VIEW analytics_verdict_latency_daily AS
WITH per_bucket AS (
    SELECT toDate(sent_at) AS day, decided_by,
           modstream_latency_bucket(dateDiff('microsecond', sent_at, created_at) / 1000) AS bucket,
           count() AS verdicts
    FROM moderation_verdicts FINAL
    GROUP BY day, decided_by, bucket
),
running AS (
    SELECT day, decided_by, bucket, verdicts,
           sum(verdicts) OVER (PARTITION BY day, decided_by ORDER BY bucket) AS below,
           sum(verdicts) OVER (PARTITION BY day, decided_by) AS total
    FROM per_bucket
)
SELECT day, decided_by, max(total) AS verdicts,
       modstream_latency_estimate_ms(minIf(bucket, below >= 0.5 * total)) AS p50_ms,
       modstream_latency_estimate_ms(minIf(bucket, below >= 0.95 * total)) AS p95_ms,
       modstream_latency_estimate_ms(max(bucket)) AS max_ms
FROM running
GROUP BY day, decided_by;

CREATE VIEW analytics_rule_hits_daily AS
SELECT toDate(sent_at) AS day, hit.rule_id AS rule_id, hit.category AS category,
       hit.severity AS severity, hit.action AS action,
       count() AS hits, countIf(decision = 'block') AS blocked
FROM moderation_verdicts FINAL
ARRAY JOIN rule_hits AS hit
GROUP BY day, rule_id, category, severity, action;

CREATE VIEW analytics_top_rules AS
SELECT hit.rule_id AS rule_id, hit.category AS category, hit.severity AS severity,
       hit.action AS action, count() AS hits,
       uniqExact(group_id) AS groups, uniqExact(sender_id) AS senders,
       toStartOfHour(min(sent_at)) AS first_hit, toStartOfHour(max(sent_at)) AS last_hit,
       rank() OVER (ORDER BY count() DESC) AS hit_rank
FROM moderation_verdicts FINAL
ARRAY JOIN rule_hits AS hit
GROUP BY rule_id, category, severity, action;

CREATE VIEW analytics_sender_flags_daily AS
SELECT toDate(sent_at) AS day, sender_id, group_id,
       countIf(decision = 'block') AS blocked, countIf(decision = 'flag') AS flagged
FROM moderation_verdicts FINAL
WHERE decision != 'allow'
GROUP BY day, sender_id, group_id;

-- A verdict counts once in each severe category among its rule hits (pipelines/severe_harm.py).
CREATE VIEW analytics_severe_harm_daily AS
SELECT toDate(sent_at) AS day, group_id, severe AS category,
       count() AS verdicts, countIf(decision = 'block') AS blocked,
       countIf(decision = 'flag') AS flagged, countIf(decision = 'allow') AS allowed,
       countIf(escalated) AS escalated, uniqExact(sender_id) AS senders
FROM moderation_verdicts FINAL
ARRAY JOIN arrayDistinct(arrayFilter(
    c -> has(['self_harm', 'sexual_exploitation_minors', 'threat', 'sexual_exploitation',
              'self_harm_incitement'], c),
    rule_hits.category)) AS severe
GROUP BY day, group_id, category;
