-- Analysts: counts per severe harm category (pipelines/severe_harm.py), documented in
-- docs/analysts.md. The category list below is the one in pipelines.severe_harm.SEVERE_CATEGORIES;
-- tests/integration/test_analysts.py seeds every one of them.

-- Verdicts per UTC day, group and severe category. A verdict counts once in each severe category
-- among its rule hits, whatever category the verdict itself was filed under (a threat next to a
-- slur is filed as hate but still counts as a threat here).
CREATE VIEW analytics_severe_harm_daily AS
SELECT (v.sent_at AT TIME ZONE 'UTC')::date                 AS day,
       v.group_id,
       s.category,
       count(*)                                             AS verdicts,
       count(*) FILTER (WHERE v.decision = 'block')         AS blocked,
       count(*) FILTER (WHERE v.decision = 'flag')          AS flagged,
       count(*) FILTER (WHERE v.decision = 'allow')         AS allowed,
       count(*) FILTER (WHERE v.escalated)                  AS escalated,
       count(DISTINCT v.sender_id)                          AS senders
FROM verdicts v
CROSS JOIN LATERAL (
    SELECT DISTINCT h ->> 'category' AS category
    FROM jsonb_array_elements(v.rule_hits) AS h
    WHERE h ->> 'category' IN ('self_harm', 'sexual_exploitation_minors', 'threat',
                               'sexual_exploitation', 'self_harm_incitement')
) s
GROUP BY 1, 2, 3;

-- The review backlog and outcomes per severe category (the category the item was filed under):
-- open and resolved items, how many a person actioned (any resolution but approve), time to a
-- decision, and the age of the oldest item still waiting.
CREATE VIEW analytics_severe_harm_review AS
SELECT category,
       count(*) FILTER (WHERE status <> 'resolved')                         AS waiting,
       count(*) FILTER (WHERE status = 'resolved')                          AS resolved,
       count(*) FILTER (WHERE status = 'resolved' AND resolution <> 'approve') AS actioned,
       count(*) FILTER (WHERE status = 'resolved' AND resolution = 'approve')  AS approved,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY EXTRACT(EPOCH FROM resolved_at - created_at))
           FILTER (WHERE status = 'resolved')                               AS p50_decision_s,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY EXTRACT(EPOCH FROM resolved_at - created_at))
           FILTER (WHERE status = 'resolved')                               AS p95_decision_s,
       max(EXTRACT(EPOCH FROM now() - created_at)) FILTER (WHERE status <> 'resolved')
                                                                            AS oldest_waiting_s
FROM review_items
WHERE category IN ('self_harm', 'sexual_exploitation_minors', 'threat', 'sexual_exploitation',
                   'self_harm_incitement')
GROUP BY category;

-- Every object belongs to modstream_owner since 0020 (migrations/README.md).
ALTER VIEW analytics_severe_harm_daily OWNER TO modstream_owner;
ALTER VIEW analytics_severe_harm_review OWNER TO modstream_owner;
GRANT SELECT ON analytics_severe_harm_daily, analytics_severe_harm_review TO modstream_analyst;
