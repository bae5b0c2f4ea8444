-- The item view's conversation (review/conversation.py): the messages around an escalation,
-- with the texts modstream still retains. Escalations' texts are the review service's already;
-- the texts of messages waiting for the model (pending_texts, kept until re-scored or until
-- retention deletes them) are read by their key, never written, and every showing is audited
-- (review_events, view_text). The columns are named, so `SELECT *` stays refused.
GRANT SELECT (source_topic, source_partition, source_offset, message_text)
    ON pending_texts TO modstream_review;
