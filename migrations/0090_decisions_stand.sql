-- A person's decision stands (worker/rescan.py, docs/architecture.md "Model lifecycle"). A rescan
-- never changes a verdict whose review item a person decided, holds a live claim on, or sent to
-- the admins: it records what it would now decide in the rescan_* columns beside the verdict.
-- Every other verdict it reads is updated in place (scores, model and version, changed or not)
-- and stamped with the rescan's id; review items of verdicts it no longer escalates are closed
-- (status 'closed', with a system event in review_events), closed ones it escalates again are
-- reopened. Existing rows stay valid: the new columns are NULL until a rescan writes them.

ALTER TABLE verdicts
    ADD COLUMN rescan_decision      text CHECK (rescan_decision IN ('allow', 'flag', 'block')),
    ADD COLUMN rescan_decided_by    text
        CHECK (rescan_decided_by IN ('rules', 'model', 'pending_model')),
    ADD COLUMN rescan_escalated     boolean,
    ADD COLUMN rescan_category      text,
    ADD COLUMN rescan_scores        jsonb,
    ADD COLUMN rescan_model_name    text,
    ADD COLUMN rescan_model_version text;

-- 'closed': no person decided; a rescan withdrew the escalation. Closed items leave the queues
-- and, like resolved ones, are never claimed or decided again (unless a rescan reopens them).
ALTER TABLE review_items DROP CONSTRAINT review_items_status_check;
ALTER TABLE review_items ADD CONSTRAINT review_items_status_check
    CHECK (status IN ('open', 'claimed', 'resolved', 'closed'));
ALTER TABLE review_items ADD COLUMN closed_at timestamptz;
DROP INDEX review_items_queue_idx;
CREATE INDEX review_items_queue_idx ON review_items (priority DESC, created_at)
    WHERE status IN ('open', 'claimed');
-- Retention clears the text of closed items as of resolved ones.
CREATE INDEX review_items_closed_retention_idx ON review_items (closed_at)
    WHERE status = 'closed';

-- Where each review item of a rescan's batch stands, its row locked until the rescan's
-- transaction ends (so a claim or a decision cannot slip in between): 'held' (resolved, under a
-- live claim, or in the admins' queue: a person has it), 'closed', or 'waiting' (open, or its
-- claim expired). The worker's login cannot lock review_items itself; this runs as the owner.
CREATE FUNCTION modstream_review_item_states(
    p_topic text, p_partitions integer[], p_offsets bigint[])
RETURNS TABLE (source_partition integer, source_offset bigint, state text)
LANGUAGE sql AS $$
    SELECT r.source_partition, r.source_offset,
           CASE WHEN r.status = 'resolved' OR r.queue = 'admin'
                     OR (r.status = 'claimed' AND COALESCE(r.claim_expires_at > now(), false))
                THEN 'held'
                WHEN r.status = 'closed' THEN 'closed'
                ELSE 'waiting' END
    FROM review_items r
    JOIN unnest(p_partitions, p_offsets) AS x(p, o)
      ON r.source_partition = x.p AND r.source_offset = x.o
    WHERE r.source_topic = p_topic
    FOR UPDATE OF r
$$;

-- Close the waiting items at the positions (never a held one: checked again here) and append a
-- system event per item closed; the number closed.
CREATE FUNCTION modstream_rescan_close_items(
    p_topic text, p_partitions integer[], p_offsets bigint[], p_rescan_id uuid, p_model text)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    closed integer;
BEGIN
    WITH done AS (
        UPDATE review_items r
        SET status = 'closed', closed_at = now(), claimed_by = NULL, claimed_at = NULL,
            claim_expires_at = NULL
        FROM unnest(p_partitions, p_offsets) AS x(p, o)
        WHERE r.source_topic = p_topic AND r.source_partition = x.p AND r.source_offset = x.o
          AND r.queue = 'moderator'
          AND (r.status = 'open'
               OR (r.status = 'claimed' AND NOT COALESCE(r.claim_expires_at > now(), false)))
        RETURNING r.id)
    INSERT INTO review_events (review_item_id, actor, action, reason, details)
    SELECT id, 'rescan', 'close', 'the rescan no longer escalates this message',
           jsonb_build_object('role', 'system', 'rescan_id', p_rescan_id, 'model', p_model)
    FROM done;
    GET DIAGNOSTICS closed = ROW_COUNT;
    RETURN closed;
END;
$$;

-- Reopen the closed items at the positions with the new escalation's category, priority,
-- automatic decision and reasons (a JSON array of strings), one system event each; the number.
CREATE FUNCTION modstream_rescan_reopen_items(
    p_topic text, p_partitions integer[], p_offsets bigint[], p_categories text[],
    p_priorities real[], p_decisions text[], p_reasons text[], p_rescan_id uuid, p_model text)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    reopened integer;
BEGIN
    WITH done AS (
        UPDATE review_items r
        SET status = 'open', closed_at = NULL, category = x.c, priority = x.pr,
            auto_decision = x.d, reasons = ARRAY(SELECT jsonb_array_elements_text(x.rs::jsonb))
        FROM unnest(p_partitions, p_offsets, p_categories, p_priorities, p_decisions, p_reasons)
             AS x(p, o, c, pr, d, rs)
        WHERE r.source_topic = p_topic AND r.source_partition = x.p AND r.source_offset = x.o
          AND r.status = 'closed'
        RETURNING r.id)
    INSERT INTO review_events (review_item_id, actor, action, reason, details)
    SELECT id, 'rescan', 'reopen', 'the rescan escalates this message again',
           jsonb_build_object('role', 'system', 'rescan_id', p_rescan_id, 'model', p_model)
    FROM done;
    GET DIAGNOSTICS reopened = ROW_COUNT;
    RETURN reopened;
END;
$$;

DO $$
DECLARE
    fn text;
BEGIN
    FOREACH fn IN ARRAY ARRAY[
        'modstream_review_item_states(text, integer[], bigint[])',
        'modstream_rescan_close_items(text, integer[], bigint[], uuid, text)',
        'modstream_rescan_reopen_items(text, integer[], bigint[], text[], real[], text[], '
            'text[], uuid, text)'] LOOP
        EXECUTE format('ALTER FUNCTION %s OWNER TO modstream_owner', fn);
        EXECUTE format('ALTER FUNCTION %s SECURITY DEFINER SET search_path = public, pg_temp',
                       fn);
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', fn);
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO modstream_worker', fn);
    END LOOP;
END;
$$;

-- The rescan writes the would-be verdict beside a held one, and clears it on a verdict it
-- updates; it reads strikes as they stood when a message was sent.
GRANT UPDATE (rescan_decision, rescan_decided_by, rescan_escalated, rescan_category,
              rescan_scores, rescan_model_name, rescan_model_version)
    ON verdicts TO modstream_worker;
GRANT SELECT (created_at) ON sender_strikes TO modstream_worker;

-- Analysts see the would-be verdict beside the verdict (new columns last, as 0081 did).
CREATE OR REPLACE VIEW analytics_verdicts AS
SELECT source_topic, source_partition, source_offset, sent_at, message_id, group_id, sender_id,
       decision, decided_by, escalated, category, priority, reasons, rule_hits, scores,
       sentiment_label, intent_label, toxicity_label, model_name, model_version, batch_id,
       queue_ms, inference_ms, created_at, rescan_id, rescanned_at, rescan_decision,
       rescan_decided_by, rescan_escalated, rescan_category, rescan_scores, rescan_model_name,
       rescan_model_version
FROM verdicts;

CREATE OR REPLACE VIEW analytics_review_items AS
SELECT id, source_topic, source_partition, source_offset, sent_at, message_id, group_id,
       sender_id, category, priority, auto_decision, reasons, queue, status, resolution,
       resolved_by, resolved_at, created_at,
       EXTRACT(EPOCH FROM resolved_at - created_at)::double precision AS decision_s,
       closed_at
FROM review_items;

-- Unchanged from 0070 but for "waiting": a closed item waits for no one.
CREATE OR REPLACE VIEW analytics_severe_harm_review AS
SELECT category,
       count(*) FILTER (WHERE status IN ('open', 'claimed'))                AS waiting,
       count(*) FILTER (WHERE status = 'resolved')                          AS resolved,
       count(*) FILTER (WHERE status = 'resolved' AND resolution <> 'approve') AS actioned,
       count(*) FILTER (WHERE status = 'resolved' AND resolution = 'approve')  AS approved,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY EXTRACT(EPOCH FROM resolved_at - created_at))
           FILTER (WHERE status = 'resolved')                               AS p50_decision_s,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY EXTRACT(EPOCH FROM resolved_at - created_at))
           FILTER (WHERE status = 'resolved')                               AS p95_decision_s,
       max(EXTRACT(EPOCH FROM now() - created_at)) FILTER (WHERE status IN ('open', 'claimed'))
                                                                            AS oldest_waiting_s
FROM review_items
WHERE category = ANY (modstream_severe_categories())
GROUP BY category;
