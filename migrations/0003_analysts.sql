-- Analysts: documented, read-only views and the role that may read them (docs/analysts.md).
-- The views never expose message text or text hashes; the role can read the views and nothing
-- else (views run with their owner's rights, so no table grant is needed).

-- Verdicts without text_sha256 (a hash of short text can be reversed by guessing).
CREATE VIEW analytics_verdicts AS
SELECT source_topic, source_partition, source_offset, sent_at, message_id, group_id, sender_id,
       decision, decided_by, escalated, category, priority, reasons, rule_hits, scores,
       sentiment_label, intent_label, toxicity_label, model_name, model_version, batch_id,
       queue_ms, inference_ms, created_at
FROM verdicts;

-- Escalations and how people resolved them, without the message text.
CREATE VIEW analytics_review_items AS
SELECT id, source_topic, source_partition, source_offset, sent_at, message_id, group_id,
       sender_id, category, priority, auto_decision, reasons, queue, status, resolution,
       resolved_by, resolved_at, created_at,
       EXTRACT(EPOCH FROM resolved_at - created_at)::double precision AS decision_s
FROM review_items;

-- Every moderator action (the free-text reason stays in review_events).
CREATE VIEW analytics_review_events AS
SELECT id, review_item_id, actor, action, details ->> 'role' AS actor_role, created_at
FROM review_events;

-- Verdicts per UTC day, group, category and decision, with the share of the group's day.
CREATE VIEW analytics_verdict_rates_daily AS
SELECT (sent_at AT TIME ZONE 'UTC')::date                       AS day,
       group_id,
       COALESCE(category, 'none')                               AS category,
       decision,
       count(*)                                                 AS verdicts,
       count(*) FILTER (WHERE escalated)                        AS escalated,
       count(*) FILTER (WHERE decided_by = 'rules')             AS by_rules,
       count(*) FILTER (WHERE decided_by = 'model')             AS by_model,
       count(*) FILTER (WHERE decided_by = 'pending_model')     AS pending_model,
       round(count(*)::numeric / sum(count(*)) OVER (
           PARTITION BY (sent_at AT TIME ZONE 'UTC')::date, group_id), 4) AS share_of_group_day
FROM verdicts
GROUP BY 1, 2, 3, 4;

-- How often a person agreed with the automatic verdict, per model version and category.
-- "Harmful" on the model side: decision flag or block; on the moderator side: any resolution
-- but approve. Only resolved escalations whose verdict came from a model count.
CREATE VIEW analytics_model_agreement AS
SELECT v.model_name,
       v.model_version,
       COALESCE(r.category, 'none')                                         AS category,
       count(*)                                                             AS decided,
       count(*) FILTER (WHERE (v.decision <> 'allow') = (r.resolution <> 'approve')) AS agreed,
       round(count(*) FILTER (WHERE (v.decision <> 'allow') = (r.resolution <> 'approve'))::numeric
             / count(*), 4)                                                 AS agreement_rate,
       count(*) FILTER (WHERE v.decision <> 'allow' AND r.resolution = 'approve')  AS model_harsher,
       count(*) FILTER (WHERE v.decision = 'allow' AND r.resolution <> 'approve')  AS model_softer
FROM review_items r
JOIN verdicts v
  ON v.source_topic = r.source_topic AND v.source_partition = r.source_partition
 AND v.source_offset = r.source_offset AND v.sent_at = r.sent_at
WHERE r.status = 'resolved' AND v.model_version IS NOT NULL
GROUP BY 1, 2, 3;

-- Time from message to verdict per UTC day and deciding stage, in milliseconds.
CREATE VIEW analytics_verdict_latency_daily AS
SELECT (sent_at AT TIME ZONE 'UTC')::date AS day,
       decided_by,
       count(*) AS verdicts,
       percentile_cont(0.5) WITHIN GROUP (
           ORDER BY EXTRACT(EPOCH FROM created_at - sent_at) * 1000)  AS p50_ms,
       percentile_cont(0.95) WITHIN GROUP (
           ORDER BY EXTRACT(EPOCH FROM created_at - sent_at) * 1000)  AS p95_ms,
       max(EXTRACT(EPOCH FROM created_at - sent_at) * 1000)           AS max_ms,
       avg(queue_ms)                                                  AS avg_queue_ms,
       avg(inference_ms)                                              AS avg_inference_ms
FROM verdicts
GROUP BY 1, 2;

-- Time from escalation to a person's decision per UTC day (of the decision) and category.
CREATE VIEW analytics_review_latency_daily AS
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
WHERE status = 'resolved'
GROUP BY 1, 2;

-- Rule hits per UTC day (one row per rule and day).
CREATE VIEW analytics_rule_hits_daily AS
SELECT (v.sent_at AT TIME ZONE 'UTC')::date AS day,
       h ->> 'rule_id'                     AS rule_id,
       h ->> 'category'                    AS category,
       h ->> 'severity'                    AS severity,
       h ->> 'action'                      AS action,
       count(*)                            AS hits,
       count(*) FILTER (WHERE v.decision = 'block') AS blocked
FROM verdicts v
CROSS JOIN LATERAL jsonb_array_elements(v.rule_hits) AS h
GROUP BY 1, 2, 3, 4, 5;

-- Rules ranked by hits over all retained verdicts.
CREATE VIEW analytics_top_rules AS
SELECT h ->> 'rule_id'                     AS rule_id,
       h ->> 'category'                    AS category,
       h ->> 'severity'                    AS severity,
       h ->> 'action'                      AS action,
       count(*)                            AS hits,
       count(DISTINCT v.group_id)          AS groups,
       count(DISTINCT v.sender_id)         AS senders,
       min(v.sent_at)                      AS first_hit,
       max(v.sent_at)                      AS last_hit,
       rank() OVER (ORDER BY count(*) DESC) AS hit_rank
FROM verdicts v
CROSS JOIN LATERAL jsonb_array_elements(v.rule_hits) AS h
GROUP BY 1, 2, 3, 4;

-- The read-only analyst role. Roles are cluster-wide, so another database on the same server
-- may have created it already.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'modstream_analyst') THEN
        CREATE ROLE modstream_analyst NOLOGIN;
    END IF;
    EXECUTE format('GRANT CONNECT ON DATABASE %I TO modstream_analyst', current_database());
END;
$$;

GRANT USAGE ON SCHEMA public TO modstream_analyst;
GRANT SELECT ON
    analytics_verdicts,
    analytics_review_items,
    analytics_review_events,
    analytics_verdict_rates_daily,
    analytics_model_agreement,
    analytics_verdict_latency_daily,
    analytics_review_latency_daily,
    analytics_rule_hits_daily,
    analytics_top_rules
TO modstream_analyst;
