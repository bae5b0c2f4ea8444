-- The example queries of docs/analysts.md that read verdicts, rewritten for ClickHouse over the
-- views of 01_verdicts.sql (same numbers as in the document). Queries 4, 5, 7 and 9 read the
-- review queue's tables, which stay in PostgreSQL (see docs/analysts.md, "ClickHouse").
-- tests/integration/test_clickhouse.py runs each one and compares 1, 2, 3, 8 and 10 with
-- PostgreSQL's answers on the same verdicts. Where a result column is named like the column it
-- sums, `prefer_column_name_to_alias` makes ClickHouse read the column (PostgreSQL's rule).

-- query 1: block and flag rates per group over the last 7 days
SELECT group_id,
       sum(verdicts) AS verdicts,
       round(sumIf(verdicts, decision = 'block') / sum(verdicts), 4) AS block_rate,
       round(sumIf(verdicts, decision = 'flag') / sum(verdicts), 4) AS flag_rate
FROM analytics_verdict_rates_daily
WHERE day >= today() - 7
GROUP BY group_id
ORDER BY block_rate DESC, sum(verdicts) DESC, group_id
SETTINGS prefer_column_name_to_alias = 1;

-- query 2: daily verdict volume by decision
SELECT day, decision, sum(verdicts) AS verdicts
FROM analytics_verdict_totals_daily
GROUP BY day, decision
ORDER BY day, decision;

-- query 3: categories that escalate most to human review
SELECT category,
       sum(escalated) AS escalated,
       round(sum(escalated) / nullIf(sum(verdicts), 0), 4) AS escalation_rate
FROM analytics_verdict_totals_daily
GROUP BY category
ORDER BY sum(escalated) DESC, category
SETTINGS prefer_column_name_to_alias = 1;

-- query 6: message-to-verdict latency per day and stage (the record carries no inference time)
SELECT day, decided_by, verdicts, round(p50_ms, 1) AS p50_ms, round(p95_ms, 1) AS p95_ms
FROM analytics_verdict_latency_daily
ORDER BY day DESC, decided_by;

-- query 8: the ten rules that hit most, and how often their message was blocked
SELECT t.rule_id, t.category, t.severity, t.hits, t.groups, sum(d.blocked) AS blocked
FROM analytics_top_rules AS t
LEFT JOIN analytics_rule_hits_daily AS d USING (rule_id, category, severity, action)
WHERE t.hit_rank <= 10
GROUP BY t.rule_id, t.category, t.severity, t.hits, t.groups
ORDER BY t.hits DESC, t.rule_id;

-- query 10: repeat senders, most flagged or blocked in the last 30 days
SELECT sender_id,
       sum(blocked) AS blocked,
       sum(flagged) AS flagged,
       uniqExact(group_id) AS groups
FROM analytics_sender_flags_daily
WHERE day >= today() - 30
GROUP BY sender_id
ORDER BY blocked DESC, flagged DESC, sender_id
LIMIT 20;

-- query 11: severe harm per category over the last 7 days (the review backlog stays in PostgreSQL)
SELECT category, sum(verdicts) AS verdicts, sum(blocked) AS blocked, sum(flagged) AS flagged,
       sum(escalated) AS escalated
FROM analytics_severe_harm_daily
WHERE day >= today() - 7
GROUP BY category
ORDER BY verdicts DESC, category;

-- query 12: drill-down, the last hour's blocked verdicts
SELECT sent_at, group_id, sender_id, category, decided_by, reasons
FROM moderation_verdicts FINAL
WHERE sent_at >= now() - INTERVAL 1 HOUR AND decision = 'block'
ORDER BY sent_at DESC, source_partition, source_offset
LIMIT 50;
