-- Analysts' rollups: aggregates of the verdicts that the documented views (docs/analysts.md)
-- read instead of every verdict row. A periodic job keeps them (`modstream_rollups_refresh`, run
-- by every worker every `rollups.refresh_interval_s`, or by `modstream rollups refresh`); the
-- verdict transaction itself does no rollup work (BENCHMARKS.md, "Analysts' rollups", has the
-- write-path cost of this and of updating them in the verdict transaction).
--
-- How the job stays exact with no double counting:
--   * every verdict row records the transaction that inserted it (`rollup_xid`, a default); the
--     job remembers the snapshot it last counted at (`rollup_state.counted_snapshot`) and each run
--     counts the rows whose inserting transaction that snapshot did not see, at a new snapshot
--     (REPEATABLE READ), so a transaction that commits late is counted by the next run, never
--     lost and never counted twice, whatever order transactions commit in;
--   * an UPDATE that changes a counted column (re-scoring, a re-scan, a manual fix) queues the
--     row's old and new versions (`rollup_verdict_changes`, by a row trigger whose WHEN skips
--     every other update, such as the outbox marking rows published); the job subtracts the old
--     and adds the new version if it had counted the row already, and drops the entry if not (it
--     counts that row's current version instead);
--   * model-versus-moderator agreement depends on review items too: a resolution queues its
--     hour (`rollup_agreement_dirty`) and the job recomputes the queued hours from the raw rows.
-- A DELETE changes no rollup: rollups keep their own history (`modstream retention
-- --keep-rollups`), longer than the raw rows'. The functions run as modstream_owner (SECURITY
-- DEFINER): writers need no grant on the rollup tables, and analysts read them through views.

-- Latency histogram buckets: bucket 0 holds latencies under 1 ms (and negative ones: a sender's
-- clock ahead of ours); bucket k (1..240) holds [2^((k-1)/8), 2^(k/8)) ms; bucket 241 holds 2^30 ms
-- (12.4 days) and more. A percentile read from the histogram is the bucket's geometric middle,
-- 2^((k-0.5)/8) ms: within a factor 2^(1/16) (+-4.4 %) of the exact nearest-rank percentile
-- (percentile_disc) between 1 ms and 12.4 days; 0 below 1 ms; 2^30 ms (a lower bound) above.
CREATE FUNCTION modstream_latency_bucket(latency_ms double precision)
RETURNS smallint LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT CASE WHEN latency_ms < 1 THEN 0
                ELSE least(241, 1 + floor(8 * ln(latency_ms) / ln(2)))::smallint END
$$;

CREATE TABLE rollup_latency_buckets (
    bucket            smallint    PRIMARY KEY,
    lower_ms          double precision,
    upper_ms          double precision,
    estimate_ms       double precision NOT NULL
);

INSERT INTO rollup_latency_buckets (bucket, lower_ms, upper_ms, estimate_ms)
SELECT k,
       CASE WHEN k = 0 THEN NULL ELSE power(2, (k - 1) / 8.0) END,
       CASE WHEN k = 241 THEN NULL ELSE power(2, k / 8.0) END,
       CASE WHEN k = 0 THEN 0 WHEN k = 241 THEN power(2, 30) ELSE power(2, (k - 0.5) / 8.0) END
FROM generate_series(0, 241) AS k;

-- The severe harm categories of pipelines/severe_harm.py (tests/integration/test_rollups.py
-- checks the two lists agree).
CREATE FUNCTION modstream_severe_categories()
RETURNS text[] LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT ARRAY['self_harm', 'sexual_exploitation_minors', 'threat', 'sexual_exploitation',
                 'self_harm_incitement']
$$;

-- Verdicts per UTC hour, group, category ('none' when null), decision and deciding stage.
CREATE TABLE rollup_verdicts_hourly (
    hour              timestamptz NOT NULL,
    group_id          text        NOT NULL,
    category          text        NOT NULL,
    decision          text        NOT NULL,
    decided_by        text        NOT NULL,
    verdicts          bigint      NOT NULL,
    escalated         bigint      NOT NULL,
    PRIMARY KEY (hour, group_id, category, decision, decided_by)
) WITH (fillfactor = 80);

-- The same per UTC day: the daily views read a day's rows here instead of 24 hours' there.
CREATE TABLE rollup_verdicts_daily (
    day               date        NOT NULL,
    group_id          text        NOT NULL,
    category          text        NOT NULL,
    decision          text        NOT NULL,
    decided_by        text        NOT NULL,
    verdicts          bigint      NOT NULL,
    escalated         bigint      NOT NULL,
    PRIMARY KEY (day, group_id, category, decision, decided_by)
) WITH (fillfactor = 80);

-- The same per UTC hour without the group: what platform-wide series and totals read (a few
-- dozen rows an hour, where the per-group tables hold thousands).
CREATE TABLE rollup_verdict_totals_hourly (
    hour              timestamptz NOT NULL,
    category          text        NOT NULL,
    decision          text        NOT NULL,
    decided_by        text        NOT NULL,
    verdicts          bigint      NOT NULL,
    escalated         bigint      NOT NULL,
    PRIMARY KEY (hour, category, decision, decided_by)
) WITH (fillfactor = 80);

-- Message-to-verdict latency (created_at - sent_at) per UTC hour and deciding stage, as bucket
-- counts, with the sums the averages need (inferences: rows with an inference_ms).
CREATE TABLE rollup_latency_hourly (
    hour              timestamptz NOT NULL,
    decided_by        text        NOT NULL,
    bucket            smallint    NOT NULL REFERENCES rollup_latency_buckets (bucket),
    verdicts          bigint      NOT NULL,
    queue_ms_sum      double precision NOT NULL,
    inference_ms_sum  double precision NOT NULL,
    inferences        bigint      NOT NULL,
    PRIMARY KEY (hour, decided_by, bucket)
) WITH (fillfactor = 80);

-- Rule hits per UTC hour and rule; blocked: hits whose verdict was a block.
CREATE TABLE rollup_rule_hits_hourly (
    hour              timestamptz NOT NULL,
    rule_id           text        NOT NULL,
    category          text        NOT NULL,
    severity          text        NOT NULL,
    action            text        NOT NULL,
    hits              bigint      NOT NULL,
    blocked           bigint      NOT NULL,
    PRIMARY KEY (hour, rule_id, category, severity, action)
) WITH (fillfactor = 80);

-- Which groups and senders a rule reached: one row per pair, with its hits (a pair whose hits
-- went back to 0 after a re-scan no longer counts) and the UTC day of its latest hit (retention).
CREATE TABLE rollup_rule_groups (
    rule_id           text        NOT NULL,
    category          text        NOT NULL,
    severity          text        NOT NULL,
    action            text        NOT NULL,
    group_id          text        NOT NULL,
    hits              bigint      NOT NULL,
    last_day          date        NOT NULL,
    PRIMARY KEY (rule_id, category, severity, action, group_id)
) WITH (fillfactor = 80);

CREATE TABLE rollup_rule_senders (
    rule_id           text        NOT NULL,
    category          text        NOT NULL,
    severity          text        NOT NULL,
    action            text        NOT NULL,
    sender_id         text        NOT NULL,
    hits              bigint      NOT NULL,
    last_day          date        NOT NULL,
    PRIMARY KEY (rule_id, category, severity, action, sender_id)
) WITH (fillfactor = 80);

-- Flagged and blocked verdicts per UTC day, sender and group (allowed verdicts are not kept).
CREATE TABLE rollup_sender_flags_daily (
    day               date        NOT NULL,
    sender_id         text        NOT NULL,
    group_id          text        NOT NULL,
    blocked           bigint      NOT NULL,
    flagged           bigint      NOT NULL,
    PRIMARY KEY (day, sender_id, group_id)
) WITH (fillfactor = 80);

-- Verdicts per UTC day, group, severe category among the verdict's rule hits (once per category
-- per verdict, as 0050's view counted them) and sender, so distinct senders stay countable.
CREATE TABLE rollup_severe_harm_daily (
    day               date        NOT NULL,
    group_id          text        NOT NULL,
    category          text        NOT NULL,
    sender_id         text        NOT NULL,
    verdicts          bigint      NOT NULL,
    blocked           bigint      NOT NULL,
    flagged           bigint      NOT NULL,
    allowed           bigint      NOT NULL,
    escalated         bigint      NOT NULL,
    PRIMARY KEY (day, group_id, category, sender_id)
) WITH (fillfactor = 80);

-- Resolved escalations of model verdicts per UTC hour of the resolution, model and the item's
-- category: did the moderator agree (harmful on both sides: decision flag/block, any resolution
-- but approve), was the model harsher or softer. Recomputed per hour by the job.
CREATE TABLE rollup_model_agreement_hourly (
    hour              timestamptz NOT NULL,
    model_name        text        NOT NULL,
    model_version     text        NOT NULL,
    category          text        NOT NULL,
    decided           bigint      NOT NULL,
    agreed            bigint      NOT NULL,
    model_harsher     bigint      NOT NULL,
    model_softer      bigint      NOT NULL,
    PRIMARY KEY (hour, model_name, model_version, category)
);

-- Adds each row of p_new and subtracts each row of p_old, in one statement. Keys are upserted in
-- ascending order, table after table, so concurrent writers take the rollup rows' locks in one
-- order and cannot deadlock on them. Deltas that cancel out (a key whose counts did not move)
-- are not written.
-- A generic plan (planned once per session): a custom plan would copy the arrays into the plan
-- as constants, which makes a call with thousands of rows (the back-fill below) 15 times slower.
CREATE FUNCTION modstream_rollups_apply(p_old verdicts[], p_new verdicts[])
RETURNS void LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    WITH changes AS MATERIALIZED (
        SELECT c.sign,
               date_trunc('hour', c.sent_at, 'UTC')                 AS hour,
               (c.sent_at AT TIME ZONE 'UTC')::date                 AS day,
               c.group_id, c.sender_id,
               coalesce(c.category, 'none')                         AS category,
               c.decision, c.decided_by, c.escalated, c.rule_hits,
               modstream_latency_bucket(
                   date_part('epoch', c.created_at - c.sent_at) * 1000) AS bucket,
               c.queue_ms, c.inference_ms
        FROM (SELECT -1 AS sign, o.* FROM unnest(p_old) AS o
              UNION ALL
              SELECT 1, n.* FROM unnest(p_new) AS n) AS c
    ),
    hits AS MATERIALIZED (
        SELECT c.sign, c.hour, c.day, c.group_id, c.sender_id, c.decision,
               h ->> 'rule_id' AS rule_id, h ->> 'category' AS category,
               h ->> 'severity' AS severity, h ->> 'action' AS action
        FROM changes c
        CROSS JOIN LATERAL jsonb_array_elements(c.rule_hits) AS h
        WHERE c.rule_hits <> '[]'::jsonb
    ),
    hourly AS (
        INSERT INTO rollup_verdicts_hourly AS r
            (hour, group_id, category, decision, decided_by, verdicts, escalated)
        SELECT hour, group_id, category, decision, decided_by,
               sum(sign), coalesce(sum(sign) FILTER (WHERE escalated), 0)
        FROM changes
        GROUP BY hour, group_id, category, decision, decided_by
        HAVING sum(sign) <> 0 OR coalesce(sum(sign) FILTER (WHERE escalated), 0) <> 0
        ORDER BY hour, group_id, category, decision, decided_by
        ON CONFLICT (hour, group_id, category, decision, decided_by) DO UPDATE
        SET verdicts = r.verdicts + EXCLUDED.verdicts, escalated = r.escalated + EXCLUDED.escalated
    ),
    daily AS (
        INSERT INTO rollup_verdicts_daily AS r
            (day, group_id, category, decision, decided_by, verdicts, escalated)
        SELECT day, group_id, category, decision, decided_by,
               sum(sign), coalesce(sum(sign) FILTER (WHERE escalated), 0)
        FROM changes
        GROUP BY day, group_id, category, decision, decided_by
        HAVING sum(sign) <> 0 OR coalesce(sum(sign) FILTER (WHERE escalated), 0) <> 0
        ORDER BY day, group_id, category, decision, decided_by
        ON CONFLICT (day, group_id, category, decision, decided_by) DO UPDATE
        SET verdicts = r.verdicts + EXCLUDED.verdicts, escalated = r.escalated + EXCLUDED.escalated
    ),
    totals AS (
        INSERT INTO rollup_verdict_totals_hourly AS r
            (hour, category, decision, decided_by, verdicts, escalated)
        SELECT hour, category, decision, decided_by,
               sum(sign), coalesce(sum(sign) FILTER (WHERE escalated), 0)
        FROM changes
        GROUP BY hour, category, decision, decided_by
        HAVING sum(sign) <> 0 OR coalesce(sum(sign) FILTER (WHERE escalated), 0) <> 0
        ORDER BY hour, category, decision, decided_by
        ON CONFLICT (hour, category, decision, decided_by) DO UPDATE
        SET verdicts = r.verdicts + EXCLUDED.verdicts, escalated = r.escalated + EXCLUDED.escalated
    ),
    latency AS (
        INSERT INTO rollup_latency_hourly AS r
            (hour, decided_by, bucket, verdicts, queue_ms_sum, inference_ms_sum, inferences)
        SELECT hour, decided_by, bucket, sum(sign), sum(sign * queue_ms),
               coalesce(sum(sign * inference_ms), 0),
               coalesce(sum(sign) FILTER (WHERE inference_ms IS NOT NULL), 0)
        FROM changes
        GROUP BY hour, decided_by, bucket
        HAVING sum(sign) <> 0 OR sum(sign * queue_ms) <> 0
            OR coalesce(sum(sign * inference_ms), 0) <> 0
            OR coalesce(sum(sign) FILTER (WHERE inference_ms IS NOT NULL), 0) <> 0
        ORDER BY hour, decided_by, bucket
        ON CONFLICT (hour, decided_by, bucket) DO UPDATE
        SET verdicts = r.verdicts + EXCLUDED.verdicts,
            queue_ms_sum = r.queue_ms_sum + EXCLUDED.queue_ms_sum,
            inference_ms_sum = r.inference_ms_sum + EXCLUDED.inference_ms_sum,
            inferences = r.inferences + EXCLUDED.inferences
    ),
    rule_hourly AS (
        INSERT INTO rollup_rule_hits_hourly AS r
            (hour, rule_id, category, severity, action, hits, blocked)
        SELECT hour, rule_id, category, severity, action,
               sum(sign), coalesce(sum(sign) FILTER (WHERE decision = 'block'), 0)
        FROM hits
        GROUP BY hour, rule_id, category, severity, action
        HAVING sum(sign) <> 0 OR coalesce(sum(sign) FILTER (WHERE decision = 'block'), 0) <> 0
        ORDER BY hour, rule_id, category, severity, action
        ON CONFLICT (hour, rule_id, category, severity, action) DO UPDATE
        SET hits = r.hits + EXCLUDED.hits, blocked = r.blocked + EXCLUDED.blocked
    ),
    rule_groups AS (
        INSERT INTO rollup_rule_groups AS r
            (rule_id, category, severity, action, group_id, hits, last_day)
        SELECT rule_id, category, severity, action, group_id, sum(sign), max(day)
        FROM hits
        GROUP BY rule_id, category, severity, action, group_id
        HAVING sum(sign) <> 0
        ORDER BY rule_id, category, severity, action, group_id
        ON CONFLICT (rule_id, category, severity, action, group_id) DO UPDATE
        SET hits = r.hits + EXCLUDED.hits, last_day = greatest(r.last_day, EXCLUDED.last_day)
    ),
    rule_senders AS (
        INSERT INTO rollup_rule_senders AS r
            (rule_id, category, severity, action, sender_id, hits, last_day)
        SELECT rule_id, category, severity, action, sender_id, sum(sign), max(day)
        FROM hits
        GROUP BY rule_id, category, severity, action, sender_id
        HAVING sum(sign) <> 0
        ORDER BY rule_id, category, severity, action, sender_id
        ON CONFLICT (rule_id, category, severity, action, sender_id) DO UPDATE
        SET hits = r.hits + EXCLUDED.hits, last_day = greatest(r.last_day, EXCLUDED.last_day)
    ),
    sender_flags AS (
        INSERT INTO rollup_sender_flags_daily AS r (day, sender_id, group_id, blocked, flagged)
        SELECT day, sender_id, group_id,
               coalesce(sum(sign) FILTER (WHERE decision = 'block'), 0),
               coalesce(sum(sign) FILTER (WHERE decision = 'flag'), 0)
        FROM changes
        WHERE decision <> 'allow'
        GROUP BY day, sender_id, group_id
        HAVING coalesce(sum(sign) FILTER (WHERE decision = 'block'), 0) <> 0
            OR coalesce(sum(sign) FILTER (WHERE decision = 'flag'), 0) <> 0
        ORDER BY day, sender_id, group_id
        ON CONFLICT (day, sender_id, group_id) DO UPDATE
        SET blocked = r.blocked + EXCLUDED.blocked, flagged = r.flagged + EXCLUDED.flagged
    )
    INSERT INTO rollup_severe_harm_daily AS r
        (day, group_id, category, sender_id, verdicts, blocked, flagged, allowed, escalated)
    SELECT c.day, c.group_id, s.category, c.sender_id, sum(c.sign),
           coalesce(sum(c.sign) FILTER (WHERE c.decision = 'block'), 0),
           coalesce(sum(c.sign) FILTER (WHERE c.decision = 'flag'), 0),
           coalesce(sum(c.sign) FILTER (WHERE c.decision = 'allow'), 0),
           coalesce(sum(c.sign) FILTER (WHERE c.escalated), 0)
    FROM changes c
    CROSS JOIN LATERAL (
        SELECT DISTINCT h ->> 'category' AS category
        FROM jsonb_array_elements(c.rule_hits) AS h
        WHERE h ->> 'category' = ANY (modstream_severe_categories())
    ) AS s
    WHERE c.rule_hits <> '[]'::jsonb
    GROUP BY c.day, c.group_id, s.category, c.sender_id
    ORDER BY c.day, c.group_id, s.category, c.sender_id
    ON CONFLICT (day, group_id, category, sender_id) DO UPDATE
    SET verdicts = r.verdicts + EXCLUDED.verdicts, blocked = r.blocked + EXCLUDED.blocked,
        flagged = r.flagged + EXCLUDED.flagged, allowed = r.allowed + EXCLUDED.allowed,
        escalated = r.escalated + EXCLUDED.escalated;
END;
$$;

-- Recomputes the agreement rows of the given UTC hours from the raw rows. An escalation's hour is
-- that of its resolution (of its creation for a resolved row without resolved_at, which only a
-- hand-written UPDATE leaves).
CREATE FUNCTION modstream_agreement_recompute(p_hours timestamptz[])
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM rollup_model_agreement_hourly WHERE hour = ANY (p_hours);
    INSERT INTO rollup_model_agreement_hourly
        (hour, model_name, model_version, category, decided, agreed, model_harsher, model_softer)
    SELECT h.hour, coalesce(v.model_name, ''), v.model_version, coalesce(i.category, 'none'),
           count(*),
           count(*) FILTER (WHERE (v.decision <> 'allow') = (i.resolution <> 'approve')),
           count(*) FILTER (WHERE v.decision <> 'allow' AND i.resolution = 'approve'),
           count(*) FILTER (WHERE v.decision = 'allow' AND i.resolution <> 'approve')
    FROM (SELECT DISTINCT hour FROM unnest(p_hours) AS hour) AS h
    JOIN review_items AS i
      ON i.status = 'resolved' AND coalesce(i.resolved_at, i.created_at) >= h.hour
     AND coalesce(i.resolved_at, i.created_at) < h.hour + interval '1 hour'
    JOIN verdicts AS v
      ON v.source_topic = i.source_topic AND v.source_partition = i.source_partition
     AND v.source_offset = i.source_offset AND v.sent_at = i.sent_at
    WHERE v.model_version IS NOT NULL
    GROUP BY 1, 2, 3, 4;
END;
$$;

CREATE INDEX review_items_decided_at_idx ON review_items ((coalesce(resolved_at, created_at)))
    WHERE status = 'resolved';

-- Which transaction inserted a verdict row (pg_current_xact_id, as a number so a block-range
-- index can find the newest rows); NULL for rows older than this migration. Adding a nullable
-- column and then a default rewrites nothing, however large the table.
ALTER TABLE verdicts ADD COLUMN rollup_xid bigint;
ALTER TABLE verdicts ALTER COLUMN rollup_xid SET DEFAULT pg_current_xact_id()::text::bigint;

-- Block-range indexes, a few kilobytes per partition and cheap to keep up because rows arrive
-- in about the order of both columns: the job's "rows since the last snapshot", and
-- time-bounded reads of raw rows (analytics_verdicts drill-downs, a week of moderator actions).
-- BENCHMARKS.md has their measured effect on writes and reads.
CREATE INDEX verdicts_rollup_xid_brin ON verdicts USING brin (rollup_xid)
    WITH (autosummarize = on);
CREATE INDEX verdicts_sent_at_brin ON verdicts USING brin (sent_at) WITH (autosummarize = on);
CREATE INDEX review_events_created_at_brin ON review_events USING brin (created_at)
    WITH (autosummarize = on);

-- Updated verdicts waiting for the job: the row's old and new versions, and the transaction
-- that inserted the row (the job needs to know whether it had counted it).
CREATE TABLE rollup_verdict_changes (
    inserted_xid      bigint,
    old_row           verdicts    NOT NULL,
    new_row           verdicts    NOT NULL,
    queued_at         timestamptz NOT NULL DEFAULT now()
);

-- UTC hours (of resolved_at) whose agreement the job must recompute.
CREATE TABLE rollup_agreement_dirty (
    hour              timestamptz NOT NULL
);

-- Where the job stands: the snapshot whose visible verdicts are all counted (NULL: none yet),
-- and a time before which every committed verdict is counted.
CREATE TABLE rollup_state (
    singleton         boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    counted_snapshot  pg_snapshot,
    covered_until     timestamptz,
    refreshed_at      timestamptz,
    last_rows         bigint      NOT NULL DEFAULT 0,
    last_changes      bigint      NOT NULL DEFAULT 0,
    last_duration_s   double precision
);
INSERT INTO rollup_state DEFAULT VALUES;

-- Old and new versions of an updated row as `verdicts` rows, matched by column name (a
-- partition's row type may order its columns differently from the parent's).
CREATE FUNCTION modstream_rollups_on_verdict_update()
RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    INSERT INTO rollup_verdict_changes (inserted_xid, old_row, new_row)
    VALUES (OLD.rollup_xid, jsonb_populate_record(NULL::verdicts, to_jsonb(OLD)),
            jsonb_populate_record(NULL::verdicts, to_jsonb(NEW)));
    RETURN NULL;
END;
$$;

CREATE TRIGGER verdicts_rollups_update
    AFTER UPDATE ON verdicts FOR EACH ROW
    WHEN ((OLD.sent_at, OLD.created_at, OLD.group_id, OLD.sender_id, OLD.decision,
           OLD.decided_by, OLD.escalated, OLD.category, OLD.rule_hits, OLD.queue_ms,
           OLD.inference_ms)
          IS DISTINCT FROM
          (NEW.sent_at, NEW.created_at, NEW.group_id, NEW.sender_id, NEW.decision,
           NEW.decided_by, NEW.escalated, NEW.category, NEW.rule_hits, NEW.queue_ms,
           NEW.inference_ms)
          OR (OLD.model_name, OLD.model_version) IS DISTINCT FROM (NEW.model_name, NEW.model_version))
    EXECUTE FUNCTION modstream_rollups_on_verdict_update();

CREATE FUNCTION modstream_rollups_on_review_item_change()
RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.status = 'resolved' THEN
        INSERT INTO rollup_agreement_dirty
        VALUES (date_trunc('hour', coalesce(OLD.resolved_at, OLD.created_at), 'UTC'));
    END IF;
    IF NEW.status = 'resolved' THEN
        INSERT INTO rollup_agreement_dirty
        VALUES (date_trunc('hour', coalesce(NEW.resolved_at, NEW.created_at), 'UTC'));
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER review_items_rollups_insert
    AFTER INSERT ON review_items FOR EACH ROW WHEN (NEW.status = 'resolved')
    EXECUTE FUNCTION modstream_rollups_on_review_item_change();
CREATE TRIGGER review_items_rollups_update
    AFTER UPDATE ON review_items FOR EACH ROW
    WHEN ((OLD.status = 'resolved' OR NEW.status = 'resolved')
          AND (OLD.status, OLD.resolution, OLD.resolved_at, OLD.category, OLD.created_at)
              IS DISTINCT FROM
              (NEW.status, NEW.resolution, NEW.resolved_at, NEW.category, NEW.created_at))
    EXECUTE FUNCTION modstream_rollups_on_review_item_change();

-- The job. Counts what changed since the last counted snapshot and moves the snapshot forward,
-- in the caller's REPEATABLE READ transaction (its snapshot is the new one). p_page rows go to
-- modstream_rollups_apply at a time, so a large backlog (the first run over an existing
-- database) needs bounded memory. Returns the verdict rows and changes counted, or NULL when
-- another refresh holds the job's lock. A refresh that started before a concurrent one
-- committed fails with a serialization error when it reads rollup_state (nothing is counted
-- twice); the caller just tries again later.
CREATE FUNCTION modstream_rollups_refresh(p_page integer DEFAULT 20000)
RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER
SET search_path = public, pg_temp SET plan_cache_mode = force_custom_plan AS $$
DECLARE
    counted   pg_snapshot;
    v         verdicts;
    change    rollup_verdict_changes;
    page_old  verdicts[] := '{}';
    page_new  verdicts[] := '{}';
    hours     timestamptz[];
    rows_done bigint := 0;
    changes   bigint := 0;
BEGIN
    IF current_setting('transaction_isolation') <> 'repeatable read' THEN
        RAISE EXCEPTION 'modstream_rollups_refresh must run in a REPEATABLE READ transaction'
            USING ERRCODE = 'invalid_transaction_state';
    END IF;
    IF p_page < 1 THEN
        RAISE EXCEPTION 'p_page must be positive' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT pg_try_advisory_xact_lock(hashtext('modstream_rollups_refresh')) THEN
        RETURN NULL;
    END IF;
    SELECT counted_snapshot INTO counted FROM rollup_state FOR UPDATE;

    -- Verdict rows whose inserting transaction the counted snapshot did not see (all, at first).
    FOR v IN
        SELECT * FROM verdicts AS r
        WHERE counted IS NULL
           OR (r.rollup_xid >= pg_snapshot_xmin(counted)::text::bigint
               AND NOT pg_visible_in_snapshot(r.rollup_xid::text::xid8, counted))
    LOOP
        page_new := page_new || v;
        IF cardinality(page_new) >= p_page THEN
            PERFORM modstream_rollups_apply('{}', page_new);
            rows_done := rows_done + cardinality(page_new);
            page_new := '{}';
        END IF;
    END LOOP;
    PERFORM modstream_rollups_apply('{}', page_new);
    rows_done := rows_done + cardinality(page_new);
    page_new := '{}';

    -- Hours whose agreement may have moved: resolutions, and updates of verdicts with a
    -- resolved escalation. Read before the queue below is emptied (same snapshot, same rows).
    WITH gone AS (DELETE FROM rollup_agreement_dirty RETURNING hour)
    SELECT ARRAY(
        SELECT hour FROM gone
        UNION
        SELECT date_trunc('hour', coalesce(i.resolved_at, i.created_at), 'UTC')
        FROM rollup_verdict_changes AS c
        JOIN review_items AS i
          ON i.source_topic = (c.new_row).source_topic
         AND i.source_partition = (c.new_row).source_partition
         AND i.source_offset = (c.new_row).source_offset
        WHERE i.status = 'resolved')
    INTO hours;

    -- Updates: applied to rows counted before; a row counted above already has its current
    -- version in the rollups, so its queued updates are dropped.
    FOR change IN DELETE FROM rollup_verdict_changes RETURNING * LOOP
        changes := changes + 1;
        CONTINUE WHEN counted IS NULL;
        CONTINUE WHEN change.inserted_xid IS NOT NULL
                  AND NOT pg_visible_in_snapshot(change.inserted_xid::text::xid8, counted);
        page_old := page_old || change.old_row;
        page_new := page_new || change.new_row;
        IF cardinality(page_new) >= p_page THEN
            PERFORM modstream_rollups_apply(page_old, page_new);
            page_old := '{}';
            page_new := '{}';
        END IF;
    END LOOP;
    PERFORM modstream_rollups_apply(page_old, page_new);

    IF counted IS NULL THEN
        DELETE FROM rollup_model_agreement_hourly;
        hours := ARRAY(SELECT DISTINCT date_trunc('hour', coalesce(resolved_at, created_at), 'UTC')
                       FROM review_items WHERE status = 'resolved');
    END IF;
    PERFORM modstream_agreement_recompute(hours);

    UPDATE rollup_state
    SET counted_snapshot = pg_current_snapshot(), covered_until = transaction_timestamp(),
        refreshed_at = clock_timestamp(), last_rows = rows_done, last_changes = changes,
        last_duration_s = extract(epoch FROM clock_timestamp() - transaction_timestamp());
    RETURN rows_done + changes;
END;
$$;

-- The analysts' views, rebuilt on the rollups with 0003's and 0050's names and columns
-- (docs/analysts.md says what changed). Views that are not replaced keep reading raw rows.
DROP VIEW analytics_verdict_rates_daily, analytics_model_agreement,
          analytics_verdict_latency_daily, analytics_rule_hits_daily, analytics_top_rules,
          analytics_severe_harm_daily, analytics_severe_harm_review;

CREATE VIEW analytics_verdict_rates_hourly AS
SELECT hour, group_id, category, decision, decided_by, verdicts, escalated
FROM rollup_verdicts_hourly
WHERE verdicts <> 0 OR escalated <> 0;

CREATE VIEW analytics_verdict_rates_daily AS
SELECT day, group_id, category, decision,
       sum(verdicts)::bigint                                                     AS verdicts,
       sum(escalated)::bigint                                                    AS escalated,
       coalesce(sum(verdicts) FILTER (WHERE decided_by = 'rules'), 0)::bigint    AS by_rules,
       coalesce(sum(verdicts) FILTER (WHERE decided_by = 'model'), 0)::bigint    AS by_model,
       coalesce(sum(verdicts) FILTER (WHERE decided_by = 'pending_model'), 0)::bigint
                                                                                 AS pending_model,
       round(sum(verdicts) / sum(sum(verdicts)) OVER (PARTITION BY day, group_id), 4)
                                                                        AS share_of_group_day
FROM rollup_verdicts_daily
GROUP BY day, group_id, category, decision
HAVING sum(verdicts) > 0;

CREATE VIEW analytics_verdict_totals_daily AS
SELECT (hour AT TIME ZONE 'UTC')::date AS day, category, decision,
       sum(verdicts)::bigint                                                     AS verdicts,
       sum(escalated)::bigint                                                    AS escalated,
       coalesce(sum(verdicts) FILTER (WHERE decided_by = 'rules'), 0)::bigint    AS by_rules,
       coalesce(sum(verdicts) FILTER (WHERE decided_by = 'model'), 0)::bigint    AS by_model,
       coalesce(sum(verdicts) FILTER (WHERE decided_by = 'pending_model'), 0)::bigint
                                                                                 AS pending_model
FROM rollup_verdict_totals_hourly
GROUP BY 1, 2, 3
HAVING sum(verdicts) > 0;

CREATE VIEW analytics_latency_buckets AS
SELECT bucket, lower_ms, upper_ms, estimate_ms FROM rollup_latency_buckets;

-- The histogram per UTC hour, for percentiles over any span an analyst chooses.
CREATE VIEW analytics_verdict_latency_hourly AS
SELECT l.hour, l.decided_by, l.bucket, b.lower_ms, b.upper_ms, b.estimate_ms, l.verdicts
FROM rollup_latency_hourly AS l
JOIN rollup_latency_buckets AS b USING (bucket)
WHERE l.verdicts <> 0;

-- p50/p95/max: the estimate of the bucket holding the nearest-rank percentile (the first bucket
-- whose running count reaches p x verdicts); max is the estimate of the highest non-empty bucket.
CREATE VIEW analytics_verdict_latency_daily AS
WITH per_bucket AS (
    SELECT (hour AT TIME ZONE 'UTC')::date AS day, decided_by, bucket,
           sum(verdicts) AS verdicts, sum(queue_ms_sum) AS queue_ms_sum,
           sum(inference_ms_sum) AS inference_ms_sum, sum(inferences) AS inferences
    FROM rollup_latency_hourly
    GROUP BY 1, 2, 3
    HAVING sum(verdicts) > 0
),
running AS (
    SELECT p.*, b.estimate_ms,
           sum(p.verdicts) OVER (PARTITION BY p.day, p.decided_by ORDER BY p.bucket) AS below,
           sum(p.verdicts) OVER (PARTITION BY p.day, p.decided_by)                  AS total
    FROM per_bucket AS p
    JOIN rollup_latency_buckets AS b USING (bucket)
)
SELECT day, decided_by,
       max(total)::bigint                                                         AS verdicts,
       (array_agg(estimate_ms ORDER BY bucket) FILTER (WHERE below >= 0.5 * total))[1]
                                                                                  AS p50_ms,
       (array_agg(estimate_ms ORDER BY bucket) FILTER (WHERE below >= 0.95 * total))[1]
                                                                                  AS p95_ms,
       max(estimate_ms)                                                           AS max_ms,
       sum(queue_ms_sum) / max(total)                                             AS avg_queue_ms,
       sum(inference_ms_sum) / nullif(sum(inferences), 0)                         AS avg_inference_ms
FROM running
GROUP BY day, decided_by;

CREATE VIEW analytics_rule_hits_daily AS
SELECT (hour AT TIME ZONE 'UTC')::date AS day, rule_id, category, severity, action,
       sum(hits)::bigint AS hits, sum(blocked)::bigint AS blocked
FROM rollup_rule_hits_hourly
GROUP BY 1, 2, 3, 4, 5
HAVING sum(hits) > 0;

CREATE VIEW analytics_top_rules AS
WITH by_rule AS (
    SELECT rule_id, category, severity, action, sum(hits)::bigint AS hits,
           min(hour) FILTER (WHERE hits > 0) AS first_hit,
           max(hour) FILTER (WHERE hits > 0) AS last_hit
    FROM rollup_rule_hits_hourly
    GROUP BY rule_id, category, severity, action
    HAVING sum(hits) > 0
),
groups AS (
    SELECT rule_id, category, severity, action, count(*) AS groups
    FROM rollup_rule_groups WHERE hits > 0
    GROUP BY rule_id, category, severity, action
),
senders AS (
    SELECT rule_id, category, severity, action, count(*) AS senders
    FROM rollup_rule_senders WHERE hits > 0
    GROUP BY rule_id, category, severity, action
)
SELECT r.rule_id, r.category, r.severity, r.action, r.hits,
       coalesce(g.groups, 0) AS groups, coalesce(s.senders, 0) AS senders,
       r.first_hit, r.last_hit, rank() OVER (ORDER BY r.hits DESC) AS hit_rank
FROM by_rule AS r
LEFT JOIN groups AS g USING (rule_id, category, severity, action)
LEFT JOIN senders AS s USING (rule_id, category, severity, action);

CREATE VIEW analytics_sender_flags_daily AS
SELECT day, sender_id, group_id, blocked, flagged
FROM rollup_sender_flags_daily
WHERE blocked <> 0 OR flagged <> 0;

CREATE VIEW analytics_severe_harm_daily AS
SELECT day, group_id, category,
       sum(verdicts)::bigint AS verdicts, sum(blocked)::bigint AS blocked,
       sum(flagged)::bigint AS flagged, sum(allowed)::bigint AS allowed,
       sum(escalated)::bigint AS escalated, count(*) FILTER (WHERE verdicts > 0) AS senders
FROM rollup_severe_harm_daily
GROUP BY day, group_id, category
HAVING sum(verdicts) > 0;

CREATE VIEW analytics_model_agreement AS
SELECT model_name, model_version, category,
       sum(decided)::bigint                                   AS decided,
       sum(agreed)::bigint                                    AS agreed,
       round(sum(agreed) / sum(decided), 4)                   AS agreement_rate,
       sum(model_harsher)::bigint                             AS model_harsher,
       sum(model_softer)::bigint                              AS model_softer
FROM rollup_model_agreement_hourly
GROUP BY model_name, model_version, category;

CREATE VIEW analytics_model_agreement_daily AS
SELECT (hour AT TIME ZONE 'UTC')::date AS day, model_name, model_version, category,
       sum(decided)::bigint AS decided, sum(agreed)::bigint AS agreed,
       round(sum(agreed) / sum(decided), 4) AS agreement_rate,
       sum(model_harsher)::bigint AS model_harsher, sum(model_softer)::bigint AS model_softer
FROM rollup_model_agreement_hourly
GROUP BY 1, 2, 3, 4;

-- How fresh the rollups are: every verdict committed before covered_until is counted.
CREATE VIEW analytics_rollup_freshness AS
SELECT covered_until, refreshed_at,
       extract(epoch FROM now() - covered_until)::double precision AS lag_s,
       last_rows, last_changes, last_duration_s
FROM rollup_state;

-- Unchanged from 0050 but for the category list, which now comes from one function.
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
WHERE category = ANY (modstream_severe_categories())
GROUP BY category;

-- Ownership and grants (migrations/README.md): everything to modstream_owner; the functions
-- run as the owner; only the worker (and the owner's `modstream rollups refresh`) may run the
-- job; analysts get the views.
DO $$
DECLARE
    rel text;
BEGIN
    FOREACH rel IN ARRAY ARRAY[
        'rollup_latency_buckets', 'rollup_verdicts_hourly', 'rollup_verdicts_daily',
        'rollup_verdict_totals_hourly', 'rollup_latency_hourly', 'rollup_rule_hits_hourly',
        'rollup_rule_groups',
        'rollup_rule_senders', 'rollup_sender_flags_daily', 'rollup_severe_harm_daily',
        'rollup_model_agreement_hourly', 'rollup_verdict_changes', 'rollup_agreement_dirty',
        'rollup_state'] LOOP
        EXECUTE format('ALTER TABLE %I OWNER TO modstream_owner', rel);
    END LOOP;
    FOREACH rel IN ARRAY ARRAY[
        'analytics_verdict_rates_hourly', 'analytics_verdict_rates_daily',
        'analytics_verdict_totals_daily',
        'analytics_latency_buckets', 'analytics_verdict_latency_hourly',
        'analytics_verdict_latency_daily', 'analytics_rule_hits_daily', 'analytics_top_rules',
        'analytics_sender_flags_daily', 'analytics_severe_harm_daily',
        'analytics_model_agreement', 'analytics_model_agreement_daily',
        'analytics_severe_harm_review', 'analytics_rollup_freshness'] LOOP
        EXECUTE format('ALTER VIEW %I OWNER TO modstream_owner', rel);
        EXECUTE format('GRANT SELECT ON %I TO modstream_analyst', rel);
    END LOOP;
END;
$$;

ALTER FUNCTION modstream_latency_bucket(double precision) OWNER TO modstream_owner;
ALTER FUNCTION modstream_severe_categories() OWNER TO modstream_owner;
ALTER FUNCTION modstream_rollups_apply(verdicts[], verdicts[]) OWNER TO modstream_owner;
ALTER FUNCTION modstream_agreement_recompute(timestamptz[]) OWNER TO modstream_owner;
ALTER FUNCTION modstream_rollups_on_verdict_update() OWNER TO modstream_owner;
ALTER FUNCTION modstream_rollups_on_review_item_change() OWNER TO modstream_owner;
ALTER FUNCTION modstream_rollups_refresh(integer) OWNER TO modstream_owner;
REVOKE ALL ON FUNCTION modstream_rollups_apply(verdicts[], verdicts[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION modstream_agreement_recompute(timestamptz[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION modstream_rollups_on_verdict_update() FROM PUBLIC;
REVOKE ALL ON FUNCTION modstream_rollups_on_review_item_change() FROM PUBLIC;
REVOKE ALL ON FUNCTION modstream_rollups_refresh(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION modstream_rollups_refresh(integer) TO modstream_worker;
