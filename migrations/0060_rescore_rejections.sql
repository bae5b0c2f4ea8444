-- Pending verdicts the model refused to score (Triton INVALID_ARGUMENT on their text). Such a
-- verdict keeps its rules-only decision (decided_by stays 'pending_model'), its text is dropped
-- from pending_texts in the same transaction, and this row says why it will not be re-scored,
-- so one bad text never stalls re-scoring and an admin can find every such verdict.
CREATE TABLE rescore_rejections (
    source_topic      text        NOT NULL,
    source_partition  integer     NOT NULL,
    source_offset     bigint      NOT NULL,
    sent_at           timestamptz NOT NULL,
    reason            text        NOT NULL,
    rejected_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source_topic, source_partition, source_offset)
);

ALTER TABLE rescore_rejections OWNER TO modstream_owner;
GRANT SELECT, INSERT ON rescore_rejections TO modstream_worker;
