#!/usr/bin/env bash
# First start of the compose PostgreSQL (docker-entrypoint-initdb.d): the NOLOGIN group roles of
# migrations/0020_roles.sql and 0040_online.sql, and one login per program in its group
# (docs/security.md). The migrator owns the database, so `modstream migrate` needs no
# superuser; the services never see the superuser's password. Passwords come from the
# environment (docker-compose.yml: set them in .env for anything but a laptop).
set -euo pipefail
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
    -v migrator="$MODSTREAM_MIGRATOR_PASSWORD" \
    -v worker="$MODSTREAM_WORKER_PASSWORD" \
    -v review="$MODSTREAM_REVIEW_PASSWORD" \
    -v online="$MODSTREAM_ONLINE_PASSWORD" <<'SQL'
CREATE ROLE modstream_owner NOLOGIN;
CREATE ROLE modstream_worker NOLOGIN;
CREATE ROLE modstream_review NOLOGIN;
CREATE ROLE modstream_online NOLOGIN;
CREATE ROLE modstream_analyst NOLOGIN;
CREATE ROLE modstream_migrator LOGIN CREATEROLE PASSWORD :'migrator' IN ROLE modstream_owner;
-- The migrations grant memberships between the groups (0040: modstream_worker to
-- modstream_online); since PostgreSQL 16 that needs ADMIN on the granted role.
GRANT modstream_owner, modstream_worker, modstream_review, modstream_online, modstream_analyst
    TO modstream_migrator WITH ADMIN OPTION;
CREATE ROLE modstream_worker_login LOGIN PASSWORD :'worker' IN ROLE modstream_worker;
CREATE ROLE modstream_review_login LOGIN PASSWORD :'review' IN ROLE modstream_review;
CREATE ROLE modstream_online_login LOGIN PASSWORD :'online' IN ROLE modstream_online;
ALTER DATABASE modstream OWNER TO modstream_migrator;
ALTER SCHEMA public OWNER TO modstream_migrator;
SQL
