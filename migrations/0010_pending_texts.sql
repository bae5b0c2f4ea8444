-- Texts of verdicts decided without the model (decided_by = 'pending_model'), kept only until
-- they are re-scored. Written in the verdict transaction, deleted in the re-score transaction,
-- so a pending verdict can always be re-scored and the text never outlives its need.
CREATE TABLE pending_texts (
    source_topic      text        NOT NULL,
    source_partition  integer     NOT NULL,
    source_offset     bigint      NOT NULL,
    sent_at           timestamptz NOT NULL,
    message_text      text        NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source_topic, source_partition, source_offset)
);

CREATE INDEX pending_texts_created_at_idx ON pending_texts (created_at);
