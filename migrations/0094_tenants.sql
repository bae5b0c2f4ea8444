-- Tenants (docs/tenants.md): the community a message belongs to (pipelines/tenants.py). Every
-- verdict, review item, strike, decision (its outbox row) and appeal carries its tenant; a dead
-- letter carries it when the record could be read far enough to say (NULL otherwise). Existing
-- rows were all written for the one community there was: they are the default tenant. A tenant
-- id is 1 to 64 of a-z, 0-9, '_' and '-', starting with a letter or digit.
--
-- Adding a column with a constant default rewrites no table; the CHECK reads each table once.

ALTER TABLE verdicts ADD COLUMN tenant text NOT NULL DEFAULT 'default'
    CONSTRAINT verdicts_tenant_check CHECK (tenant ~ '^[a-z0-9][a-z0-9_-]{0,63}$');
ALTER TABLE review_items ADD COLUMN tenant text NOT NULL DEFAULT 'default'
    CONSTRAINT review_items_tenant_check CHECK (tenant ~ '^[a-z0-9][a-z0-9_-]{0,63}$');
ALTER TABLE sender_strikes ADD COLUMN tenant text NOT NULL DEFAULT 'default'
    CONSTRAINT sender_strikes_tenant_check CHECK (tenant ~ '^[a-z0-9][a-z0-9_-]{0,63}$');
ALTER TABLE review_decision_outbox ADD COLUMN tenant text NOT NULL DEFAULT 'default'
    CONSTRAINT review_decision_outbox_tenant_check
        CHECK (tenant ~ '^[a-z0-9][a-z0-9_-]{0,63}$');
ALTER TABLE appeals ADD COLUMN tenant text NOT NULL DEFAULT 'default'
    CONSTRAINT appeals_tenant_check CHECK (tenant ~ '^[a-z0-9][a-z0-9_-]{0,63}$');

-- Existing dead letters are the default tenant's; a new one names its tenant or NULL (unknown).
ALTER TABLE dead_letters ADD COLUMN tenant text DEFAULT 'default'
    CONSTRAINT dead_letters_tenant_check
        CHECK (tenant IS NULL OR tenant ~ '^[a-z0-9][a-z0-9_-]{0,63}$');
ALTER TABLE dead_letters ALTER COLUMN tenant DROP DEFAULT;

-- A moderator's queues and a strike count are per tenant.
CREATE INDEX review_items_tenant_queue_idx ON review_items (tenant, priority DESC, created_at)
    WHERE status IN ('open', 'claimed');
CREATE INDEX sender_strikes_tenant_sender_idx ON sender_strikes (tenant, sender_id, expires_at);

-- The tenants a user may act for: a platform token the tenants it may send messages for, a
-- moderator or admin the tenants whose items they see. NULL: a platform token or a moderator is
-- bound to the default tenant only, an admin to every tenant (docs/tenants.md).
ALTER TABLE review_users ADD COLUMN tenants text[]
    CONSTRAINT review_users_tenants_check CHECK (
        tenants IS NULL
        OR (cardinality(tenants) BETWEEN 1 AND 1000
            AND array_position(tenants, NULL) IS NULL
            AND array_to_string(tenants, ',')
                ~ '^[a-z0-9][a-z0-9_-]{0,63}(,[a-z0-9][a-z0-9_-]{0,63})*$'));

-- Attempts to act for a tenant the caller is not bound to: a platform token sending a message
-- for another tenant (online), a moderator asking for another tenant's item (review). Never the
-- message text or a token; the tenant asked for, when the request named one.
CREATE TABLE access_denials (
    id                bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    service           text        NOT NULL CHECK (service IN ('online', 'review')),
    actor             text        NOT NULL,
    actor_role        text        NOT NULL,
    action            text        NOT NULL CHECK (length(action) BETWEEN 1 AND 64),
    tenant            text        CHECK (tenant IS NULL OR tenant ~ '^[a-z0-9][a-z0-9_-]{0,63}$'),
    item_id           bigint,
    created_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX access_denials_created_at_idx ON access_denials (created_at);
ALTER TABLE access_denials OWNER TO modstream_owner;

-- An appeal's item carries the appealed verdict's tenant: the function now takes it, and the
-- one without it is gone (an item of no tenant cannot be opened).
DROP FUNCTION modstream_open_appeal_item(timestamptz, text, text, text, text, text, real, text,
                                         text[]);
CREATE FUNCTION modstream_open_appeal_item(
    p_sent_at timestamptz, p_message_id text, p_group_id text, p_sender_id text,
    p_message_text text, p_category text, p_priority real, p_auto_decision text,
    p_reasons text[], p_tenant text)
RETURNS TABLE (id bigint, public_id uuid, created_at timestamptz)
LANGUAGE sql AS $$
    INSERT INTO review_items AS r (source_topic, source_partition, source_offset, sent_at,
                                   message_id, group_id, sender_id, message_text, category,
                                   priority, auto_decision, reasons, queue, tenant)
    VALUES ('appeals', 0, nextval('appeal_offsets'), p_sent_at, p_message_id, p_group_id,
            p_sender_id, p_message_text, p_category, p_priority, p_auto_decision, p_reasons,
            'appeals', p_tenant)
    RETURNING r.id, r.public_id, r.created_at
$$;
ALTER FUNCTION modstream_open_appeal_item(timestamptz, text, text, text, text, text, real, text,
                                          text[], text) OWNER TO modstream_owner;
ALTER FUNCTION modstream_open_appeal_item(timestamptz, text, text, text, text, text, real, text,
                                          text[], text)
    SECURITY DEFINER SET search_path = public, pg_temp;
REVOKE ALL ON FUNCTION modstream_open_appeal_item(timestamptz, text, text, text, text, text, real,
                                                  text, text[], text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION modstream_open_appeal_item(timestamptz, text, text, text, text, text,
                                                      real, text, text[], text)
    TO modstream_review;

-- Grants (docs/security.md): the worker writes the tenant of review items (its INSERT on them is
-- column by column) and reads strikes per tenant; the review service reads verdicts' tenants;
-- the online service reads a token's tenants; both record denials.
GRANT INSERT (tenant) ON review_items TO modstream_worker;
GRANT SELECT (tenant) ON sender_strikes TO modstream_worker;
GRANT SELECT (tenant) ON verdicts TO modstream_review;
GRANT SELECT (tenants) ON review_users TO modstream_online;
GRANT INSERT ON access_denials TO modstream_review, modstream_online;

-- Analysts: row-level security. An analyst (a login that is a member of modstream_analyst) reads
-- the rows of the tenants its login is bound to in analyst_tenants (tenants NULL: every tenant);
-- a login with no row reads the default tenant's only. The analytics_* views run with their
-- owner's rights, so the policies are FORCEd onto the owner too, and they decide by the login
-- of the session (session_user), which neither SET ROLE nor a SECURITY DEFINER function changes.
-- Every other session (the services, migrations, a superuser) reads every row, as before.
CREATE TABLE analyst_tenants (
    login             name        PRIMARY KEY,
    tenants           text[]
        CHECK (tenants IS NULL
               OR (cardinality(tenants) BETWEEN 1 AND 1000
                   AND array_position(tenants, NULL) IS NULL
                   AND array_to_string(tenants, ',')
                       ~ '^[a-z0-9][a-z0-9_-]{0,63}(,[a-z0-9][a-z0-9_-]{0,63})*$')),
    created_at        timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE analyst_tenants OWNER TO modstream_owner;

-- The analyst logins that exist now read everything, as they did: they are bound to every
-- tenant. A login made from now on reads the default tenant's rows until it is bound.
INSERT INTO analyst_tenants (login, tenants)
SELECT r.rolname, NULL FROM pg_roles r
WHERE r.rolcanlogin AND NOT r.rolsuper AND pg_has_role(r.oid, 'modstream_analyst', 'MEMBER')
ON CONFLICT (login) DO NOTHING;

-- The tenants this session may read: NULL (all) unless its login is an analyst that is no
-- superuser; then the login's binding, or the default tenant alone.
CREATE FUNCTION modstream_tenant_scope()
RETURNS text[] LANGUAGE sql STABLE AS $$
    SELECT CASE
        WHEN (SELECT rolsuper FROM pg_roles WHERE rolname = session_user)
             OR NOT pg_has_role(session_user, 'modstream_analyst', 'MEMBER') THEN NULL
        WHEN EXISTS (SELECT FROM analyst_tenants WHERE login = session_user)
            THEN (SELECT tenants FROM analyst_tenants WHERE login = session_user)
        ELSE ARRAY['default']
    END
$$;
ALTER FUNCTION modstream_tenant_scope() OWNER TO modstream_owner;
ALTER FUNCTION modstream_tenant_scope() SECURITY DEFINER SET search_path = public, pg_temp;
-- Every role may run it (a policy runs it as the role it applies to); it tells a session its own
-- binding only.
GRANT EXECUTE ON FUNCTION modstream_tenant_scope() TO PUBLIC;

DO $$
DECLARE
    tbl text;
BEGIN
    -- Rows of one tenant: an analyst reads its tenants' rows.
    FOREACH tbl IN ARRAY ARRAY['verdicts', 'review_items', 'sender_strikes', 'appeals',
                               'review_decision_outbox', 'dead_letters'] LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', tbl);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', tbl);
        -- What the grants allow, as before ...
        EXECUTE format('CREATE POLICY every_row ON %I USING (true) WITH CHECK (true)', tbl);
        -- ... but an analyst reads its tenants' rows only.
        EXECUTE format(
            'CREATE POLICY tenant_scope ON %I AS RESTRICTIVE FOR SELECT '
            'USING ((SELECT modstream_tenant_scope()) IS NULL '
            'OR tenant = ANY ((SELECT modstream_tenant_scope())::text[]))', tbl);
    END LOOP;
    -- Figures over every tenant (the rollups, shadow and rescan comparisons): only for an
    -- analyst bound to every tenant.
    FOR tbl IN
        SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')
          AND (c.relname LIKE 'rollup\_%' OR c.relname IN ('shadow_verdicts', 'rescans'))
    LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', tbl);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', tbl);
        EXECUTE format('CREATE POLICY every_row ON %I USING (true) WITH CHECK (true)', tbl);
        EXECUTE format(
            'CREATE POLICY tenant_scope ON %I AS RESTRICTIVE FOR SELECT '
            'USING ((SELECT modstream_tenant_scope()) IS NULL)', tbl);
    END LOOP;
END;
$$;

-- Audit rows of items: those of the analyst's tenants' items.
ALTER TABLE review_events ENABLE ROW LEVEL SECURITY;
ALTER TABLE review_events FORCE ROW LEVEL SECURITY;
CREATE POLICY every_row ON review_events USING (true) WITH CHECK (true);
CREATE POLICY tenant_scope ON review_events AS RESTRICTIVE FOR SELECT
    USING ((SELECT modstream_tenant_scope()) IS NULL
           OR EXISTS (SELECT FROM review_items r WHERE r.id = review_events.review_item_id));

-- Analysts see the tenant of each row (new columns last, as before).
CREATE OR REPLACE VIEW analytics_verdicts AS
SELECT source_topic, source_partition, source_offset, sent_at, message_id, group_id, sender_id,
       decision, decided_by, escalated, category, priority, reasons, rule_hits, scores,
       sentiment_label, intent_label, toxicity_label, model_name, model_version, batch_id,
       queue_ms, inference_ms, created_at, rescan_id, rescanned_at, rescan_decision,
       rescan_decided_by, rescan_escalated, rescan_category, rescan_scores, rescan_model_name,
       rescan_model_version, tenant
FROM verdicts;

CREATE OR REPLACE VIEW analytics_review_items AS
SELECT id, source_topic, source_partition, source_offset, sent_at, message_id, group_id,
       sender_id, category, priority, auto_decision, reasons, queue, status, resolution,
       resolved_by, resolved_at, created_at,
       EXTRACT(EPOCH FROM resolved_at - created_at)::double precision AS decision_s,
       closed_at, tenant
FROM review_items;
