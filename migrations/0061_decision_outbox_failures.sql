-- A decision whose record Kafka refuses for itself (too large, corrupt) is tried
-- `review.publish_max_attempts` times, then set aside: marked failed with the reason and kept
-- for an admin, so it no longer blocks the decisions behind it. The relay skips failed rows.
ALTER TABLE review_decision_outbox
    ADD COLUMN failed_at      timestamptz,
    ADD COLUMN failure_reason text;

DROP INDEX review_decision_outbox_pending_idx;
CREATE INDEX review_decision_outbox_pending_idx ON review_decision_outbox (created_at)
    WHERE published_at IS NULL AND failed_at IS NULL;
CREATE INDEX review_decision_outbox_failed_idx ON review_decision_outbox (failed_at)
    WHERE failed_at IS NOT NULL;

GRANT UPDATE (failed_at, failure_reason) ON review_decision_outbox TO modstream_review;
