-- Shadow scoring (worker/shadow.py, docs/analysts.md): with `triton.shadow_model_name` set, every
-- model batch is scored again by the shadow model after its live verdicts are published, decided
-- with the same rule hits and policy, and stored here. Nothing reads these rows to decide a
-- message; analysts compare them with the live verdicts and with moderators' decisions.
--
-- Keyed like `verdicts` (Kafka coordinates and sent_at) plus the shadow model and the version
-- that answered, so a replayed batch writes nothing twice and two candidate versions can be
-- compared with the same live traffic.
CREATE TABLE shadow_verdicts (
    source_topic      text        NOT NULL,
    source_partition  integer     NOT NULL,
    source_offset     bigint      NOT NULL,
    sent_at           timestamptz NOT NULL,
    model_name        text        NOT NULL,
    model_version     text        NOT NULL,
    decision          text        NOT NULL CHECK (decision IN ('allow', 'flag', 'block')),
    escalated         boolean     NOT NULL,
    category          text,
    priority          real        NOT NULL,
    reasons           text[]      NOT NULL DEFAULT '{}',
    scores            jsonb       NOT NULL,
    batch_id          uuid,
    inference_ms      real,
    created_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source_topic, source_partition, source_offset, sent_at, model_name,
                 model_version)
);

-- Retention (`modstream retention`) deletes shadow rows with the verdicts they shadow.
CREATE INDEX shadow_verdicts_sent_at_idx ON shadow_verdicts (sent_at);

ALTER TABLE shadow_verdicts OWNER TO modstream_owner;
GRANT INSERT ON shadow_verdicts TO modstream_worker;

-- Live against shadow, per live model version, shadow model version and category: how many
-- messages both decided, how many the same way, the flips in each direction (harsher: the
-- shadow's decision is stricter, allow < flag < block), and where a moderator resolved the
-- message's review item, how often each model agreed with the moderator ("harmful" on a model's
-- side: flag or block; on the moderator's side: any resolution but approve, as in
-- analytics_model_agreement). Only live verdicts the model decided count (a rule block is never
-- shadowed; a rules-only pending_model verdict counts once it is re-scored). The category is the
-- live verdict's, or the shadow's where the live verdict allowed the message.
CREATE VIEW analytics_shadow_agreement AS
WITH paired AS (
    SELECT v.model_name                               AS live_model,
           v.model_version                            AS live_version,
           s.model_name                               AS shadow_model,
           s.model_version                            AS shadow_version,
           COALESCE(v.category, s.category, 'none')   AS category,
           v.decision                                 AS live_decision,
           s.decision                                 AS shadow_decision,
           array_position(ARRAY['allow', 'flag', 'block'], v.decision) AS live_level,
           array_position(ARRAY['allow', 'flag', 'block'], s.decision) AS shadow_level,
           r.resolution
    FROM shadow_verdicts s
    JOIN verdicts v
      ON v.source_topic = s.source_topic AND v.source_partition = s.source_partition
     AND v.source_offset = s.source_offset AND v.sent_at = s.sent_at
    LEFT JOIN review_items r
      ON r.source_topic = s.source_topic AND r.source_partition = s.source_partition
     AND r.source_offset = s.source_offset AND r.status = 'resolved'
    WHERE v.decided_by = 'model'
)
SELECT live_model,
       live_version,
       shadow_model,
       shadow_version,
       category,
       count(*)                                                        AS compared,
       count(*) FILTER (WHERE live_decision = shadow_decision)         AS agreed,
       round(count(*) FILTER (WHERE live_decision = shadow_decision)::numeric / count(*), 4)
                                                                       AS agreement_rate,
       count(*) FILTER (WHERE shadow_level > live_level)               AS shadow_harsher,
       count(*) FILTER (WHERE shadow_level < live_level)               AS shadow_softer,
       count(resolution)                                               AS moderated,
       count(*) FILTER (WHERE resolution IS NOT NULL
                          AND (live_decision <> 'allow') = (resolution <> 'approve'))
                                                                       AS live_agreed_with_moderators,
       count(*) FILTER (WHERE resolution IS NOT NULL
                          AND (shadow_decision <> 'allow') = (resolution <> 'approve'))
                                                                       AS shadow_agreed_with_moderators
FROM paired
GROUP BY 1, 2, 3, 4, 5;

-- The same pairs one level down: every (live decision, shadow decision) combination per
-- category, with examples to look up in analytics_verdicts.
CREATE VIEW analytics_shadow_flips AS
SELECT v.model_name                               AS live_model,
       v.model_version                            AS live_version,
       s.model_name                               AS shadow_model,
       s.model_version                            AS shadow_version,
       COALESCE(v.category, s.category, 'none')   AS category,
       v.decision                                 AS live_decision,
       s.decision                                 AS shadow_decision,
       count(*)                                   AS messages,
       (array_agg(v.message_id ORDER BY v.sent_at DESC))[1:5] AS example_message_ids
FROM shadow_verdicts s
JOIN verdicts v
  ON v.source_topic = s.source_topic AND v.source_partition = s.source_partition
 AND v.source_offset = s.source_offset AND v.sent_at = s.sent_at
WHERE v.decided_by = 'model'
GROUP BY 1, 2, 3, 4, 5, 6, 7;

ALTER VIEW analytics_shadow_agreement OWNER TO modstream_owner;
ALTER VIEW analytics_shadow_flips OWNER TO modstream_owner;
GRANT SELECT ON analytics_shadow_agreement, analytics_shadow_flips TO modstream_analyst;
