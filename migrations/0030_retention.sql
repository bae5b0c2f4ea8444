-- Retention of message text: `modstream retention --keep-text 30d` clears the text of resolved
-- escalations once their decision is old enough; this records when, so the console and analysts
-- can tell "removed by retention" from an empty message.
ALTER TABLE review_items ADD COLUMN text_cleared_at timestamptz;

CREATE INDEX review_items_text_retention_idx ON review_items (resolved_at)
    WHERE status = 'resolved' AND text_cleared_at IS NULL;
CREATE INDEX dead_letters_created_at_idx ON dead_letters (created_at);
CREATE INDEX sender_strikes_expires_at_idx ON sender_strikes (expires_at);
CREATE INDEX review_decision_outbox_published_idx ON review_decision_outbox (published_at)
    WHERE published_at IS NOT NULL;
