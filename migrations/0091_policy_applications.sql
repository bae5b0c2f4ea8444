-- Policy proposals go live through an admin (`modstream policy apply`, worker/policy_command.py,
-- docs/architecture.md). `policy calibrate` writes a proposal file, never the live one; an admin
-- applies it, and each application is recorded here: who (the review user whose admin token was
-- given), when, which proposal (its SHA-256), where it was written and the thresholds before and
-- after. Append-only: no login may change or delete a row.
CREATE TABLE policy_applications (
    id                bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    applied_by        text        NOT NULL,
    applied_at        timestamptz NOT NULL DEFAULT now(),
    proposal_name     text        NOT NULL,
    proposal_sha256   text        NOT NULL CHECK (length(proposal_sha256) = 64),
    target            text        NOT NULL,
    thresholds        jsonb       NOT NULL,
    previous          jsonb       NOT NULL
);

-- Records an application in the caller's transaction, for the holder of an enabled admin's API
-- token (given as its SHA-256, common/api_tokens.py); anyone else is refused with
-- insufficient_privilege and nothing is written. The caller never reads review_users: this
-- runs as the owner and returns the admin's name and the time recorded.
CREATE FUNCTION modstream_record_policy_application(
    p_token_sha256 text, p_proposal_name text, p_proposal_sha256 text, p_target text,
    p_thresholds jsonb, p_previous jsonb)
RETURNS TABLE (applied_by text, applied_at timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
    admin_name text;
BEGIN
    SELECT u.name INTO admin_name FROM review_users u
    WHERE u.token_sha256 = p_token_sha256 AND u.role = 'admin' AND u.disabled_at IS NULL;
    IF admin_name IS NULL THEN
        RAISE EXCEPTION 'not the API token of an enabled admin'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN QUERY
    INSERT INTO policy_applications AS a (applied_by, proposal_name, proposal_sha256, target,
                                          thresholds, previous)
    VALUES (admin_name, p_proposal_name, p_proposal_sha256, p_target, p_thresholds, p_previous)
    RETURNING a.applied_by, a.applied_at;
END;
$$;

ALTER TABLE policy_applications OWNER TO modstream_owner;
ALTER FUNCTION modstream_record_policy_application(text, text, text, text, jsonb, jsonb)
    OWNER TO modstream_owner;
ALTER FUNCTION modstream_record_policy_application(text, text, text, text, jsonb, jsonb)
    SECURITY DEFINER SET search_path = public, pg_temp;
REVOKE ALL ON FUNCTION modstream_record_policy_application(text, text, text, text, jsonb, jsonb)
    FROM PUBLIC;
-- `modstream policy apply` runs as the worker's login (the program whose policy it changes).
GRANT EXECUTE ON FUNCTION modstream_record_policy_application(text, text, text, text, jsonb,
                                                               jsonb)
    TO modstream_worker;

-- Analysts see who changed the policy and when.
CREATE VIEW analytics_policy_applications AS
SELECT id, applied_by, applied_at, proposal_name, proposal_sha256, target, thresholds, previous
FROM policy_applications;
ALTER VIEW analytics_policy_applications OWNER TO modstream_owner;
GRANT SELECT ON analytics_policy_applications TO modstream_analyst;
