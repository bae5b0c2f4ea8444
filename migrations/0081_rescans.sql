-- Rescans (`modstream rescan`, worker/rescan.py, docs/architecture.md): a window of history read
-- back from the Kafka topic and decided again with a chosen model and the current rules and
-- policy. One row per rescan holds what was asked and the report so far; one row per partition
-- holds the next offset to read. Both are updated in the transaction that applies a batch's
-- changed verdicts, so a rescan that crashes resumes where its last batch committed and never
-- applies a message twice.
CREATE TABLE rescans (
    rescan_id         uuid        PRIMARY KEY,
    source_topic      text        NOT NULL,
    group_id          text,
    since             timestamptz NOT NULL,
    until             timestamptz NOT NULL,
    model_name        text        NOT NULL,
    model_version     text        NOT NULL DEFAULT '',
    apply             boolean     NOT NULL,
    -- counts, per-category changes and example message ids (worker/rescan_report.py)
    report            jsonb       NOT NULL DEFAULT '{}',
    started_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    finished_at       timestamptz,
    CHECK (since < until)
);

CREATE TABLE rescan_partitions (
    rescan_id         uuid        NOT NULL REFERENCES rescans ON DELETE CASCADE,
    source_partition  integer     NOT NULL,
    next_offset       bigint      NOT NULL,
    end_offset        bigint      NOT NULL,
    PRIMARY KEY (rescan_id, source_partition)
);

-- Provenance of a verdict a rescan changed: which rescan and when (the model and its version
-- are the verdict's own model_name / model_version). NULL for a verdict no rescan changed.
ALTER TABLE verdicts ADD COLUMN rescan_id uuid;
ALTER TABLE verdicts ADD COLUMN rescanned_at timestamptz;

ALTER TABLE rescans OWNER TO modstream_owner;
ALTER TABLE rescan_partitions OWNER TO modstream_owner;
-- `modstream rescan` runs as the worker's login: it reads and updates verdicts as the
-- re-scorer does, adds review items and keeps its own progress.
GRANT SELECT, INSERT, UPDATE ON rescans TO modstream_worker;
GRANT SELECT, INSERT, UPDATE ON rescan_partitions TO modstream_worker;
-- rule_hits too: a rescan decides with the rules in use now, which may differ from those of then.
GRANT UPDATE (rescan_id, rescanned_at, rule_hits) ON verdicts TO modstream_worker;

-- Analysts see a verdict's rescan provenance (new columns go last: CREATE OR REPLACE keeps the
-- existing ones and their grants).
CREATE OR REPLACE VIEW analytics_verdicts AS
SELECT source_topic, source_partition, source_offset, sent_at, message_id, group_id, sender_id,
       decision, decided_by, escalated, category, priority, reasons, rule_hits, scores,
       sentiment_label, intent_label, toxicity_label, model_name, model_version, batch_id,
       queue_ms, inference_ms, created_at, rescan_id, rescanned_at
FROM verdicts;

-- Analysts see each rescan and its report through a view, as every other table.
CREATE VIEW analytics_rescans AS
SELECT rescan_id, source_topic, group_id, since, until, model_name, model_version, apply,
       report, started_at, updated_at, finished_at
FROM rescans;
ALTER VIEW analytics_rescans OWNER TO modstream_owner;
GRANT SELECT ON analytics_rescans TO modstream_analyst;
