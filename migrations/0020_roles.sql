-- Least privilege: one NOLOGIN group role per program, granted exactly what its SQL needs
-- (docs/security.md has the table). Login roles are created by the deployment, or by
-- `modstream stack up` locally, as members of these groups; each service connects as its own.
--
--   modstream_owner    owns every table, view and function (DDL); the login that runs
--                      `modstream migrate` and `modstream retention` is a member of it
--   modstream_worker   the daemon and `modstream rescore`
--   modstream_review   the review API, console and `modstream review add-user/disable-user`
--   modstream_analyst  the documented views only (0003_analysts.sql)
--
-- Partitions of `verdicts` need no grants: a query through the parent table is checked against
-- the parent only, and nobody but the owner addresses a partition directly.

-- Roles are cluster-wide: another database on the same server may have created them already,
-- possibly at the same moment (hence the duplicate_object / unique_violation handler).
DO $$
DECLARE
    wanted text;
BEGIN
    FOREACH wanted IN ARRAY ARRAY['modstream_owner', 'modstream_worker', 'modstream_review',
                                  'modstream_analyst'] LOOP
        IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = wanted) THEN
            BEGIN
                EXECUTE format('CREATE ROLE %I NOLOGIN', wanted);
            EXCEPTION WHEN duplicate_object OR unique_violation THEN
                NULL;
            END;
        END IF;
    END LOOP;
    -- Handing objects to modstream_owner needs membership in it (a superuser needs none).
    IF NOT (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)
       AND NOT pg_has_role(current_user, 'modstream_owner', 'MEMBER') THEN
        EXECUTE format('GRANT modstream_owner TO %I', current_user);
    END IF;
    -- Nobody connects or makes temporary tables unless a group below allows it.
    EXECUTE format('REVOKE CONNECT, TEMPORARY ON DATABASE %I FROM PUBLIC', current_database());
    EXECUTE format(
        'GRANT CONNECT ON DATABASE %I TO modstream_owner, modstream_worker, modstream_review, '
        'modstream_analyst', current_database());
END;
$$;

REVOKE ALL ON SCHEMA public FROM PUBLIC;
GRANT USAGE, CREATE ON SCHEMA public TO modstream_owner;
GRANT USAGE ON SCHEMA public TO modstream_worker, modstream_review, modstream_analyst;

-- Every relation of the schema (tables, partitions, views; identity sequences follow their
-- table) moves to the owner role.
DO $$
DECLARE
    rel record;
BEGIN
    FOR rel IN
        SELECT c.relname, c.relkind
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'v', 'm')
          AND c.relowner <> 'modstream_owner'::regrole
    LOOP
        IF rel.relkind = 'v' THEN
            EXECUTE format('ALTER VIEW %I OWNER TO modstream_owner', rel.relname);
        ELSIF rel.relkind = 'm' THEN
            EXECUTE format('ALTER MATERIALIZED VIEW %I OWNER TO modstream_owner', rel.relname);
        ELSE
            EXECUTE format('ALTER TABLE %I OWNER TO modstream_owner', rel.relname);
        END IF;
    END LOOP;
END;
$$;

-- The worker creates the coming months' partitions at start-up without owning `verdicts`: the
-- function runs with its owner's rights, on a fixed search path, and only the worker (and the
-- owner) may call it.
ALTER FUNCTION modstream_ensure_verdict_partitions(date, integer) OWNER TO modstream_owner;
ALTER FUNCTION modstream_ensure_verdict_partitions(date, integer)
    SECURITY DEFINER SET search_path = public, pg_temp;
REVOKE ALL ON FUNCTION modstream_ensure_verdict_partitions(date, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION modstream_ensure_verdict_partitions(date, integer) TO modstream_worker;

-- The worker (worker/sink.py, common/strikes.py): one transaction per batch writes verdicts,
-- escalations, dead letters, pending texts and offsets; the outbox relay marks verdicts
-- published; re-scoring updates the model-dependent columns of pending verdicts.
GRANT SELECT, INSERT ON verdicts TO modstream_worker;
GRANT UPDATE (decision, decided_by, escalated, category, priority, reasons, scores,
              sentiment_label, intent_label, toxicity_label, model_name, model_version,
              batch_id, inference_ms, published, updated_at)
    ON verdicts TO modstream_worker;
GRANT INSERT ON dead_letters TO modstream_worker;
GRANT INSERT (source_topic, source_partition, source_offset, sent_at, message_id, group_id,
              sender_id, message_text, category, priority, auto_decision, reasons)
    ON review_items TO modstream_worker;
-- ON CONFLICT (source_topic, source_partition, source_offset) needs to read its target columns.
GRANT SELECT (source_topic, source_partition, source_offset) ON review_items TO modstream_worker;
GRANT SELECT, INSERT ON consumer_offsets TO modstream_worker;
GRANT UPDATE (next_offset, updated_at) ON consumer_offsets TO modstream_worker;
GRANT SELECT, INSERT, DELETE ON pending_texts TO modstream_worker;
GRANT SELECT (sender_id, weight, expires_at) ON sender_strikes TO modstream_worker;

-- The review service (review/queue.py, auth.py, decisions.py, api.py): the queue and its
-- claims, the audit trail, strikes, the decision outbox, users and sessions; the verdict
-- fields a moderator is shown, never the text hash, and never a write to verdicts.
GRANT SELECT ON review_items TO modstream_review;
GRANT UPDATE (queue, status, claimed_by, claimed_at, claim_expires_at, resolution, resolved_by,
              resolved_at)
    ON review_items TO modstream_review;
GRANT SELECT (source_topic, source_partition, source_offset, sent_at, message_id, group_id,
              sender_id, decision, decided_by, category, reasons, rule_hits, scores,
              sentiment_label, intent_label, toxicity_label, model_name, model_version, batch_id,
              queue_ms, inference_ms, created_at)
    ON verdicts TO modstream_review;
GRANT SELECT, INSERT ON review_events TO modstream_review;
GRANT SELECT, INSERT ON sender_strikes TO modstream_review;
GRANT SELECT, INSERT ON review_decision_outbox TO modstream_review;
GRANT UPDATE (published_at, attempts) ON review_decision_outbox TO modstream_review;
GRANT SELECT, INSERT ON review_users TO modstream_review;
GRANT UPDATE (disabled_at) ON review_users TO modstream_review;
GRANT SELECT, INSERT, DELETE ON review_sessions TO modstream_review;

-- Analysts keep exactly what 0003 granted: the analytics_* views (now owned by
-- modstream_owner, whose rights they run with).
