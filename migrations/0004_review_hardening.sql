-- Review hardening: opaque item ids for URLs, and per-user category membership.

-- URLs and API answers name an item by this random id, never by the sequential `id` (which stays
-- the key for joins, strikes, events and the decision outbox). Existing rows get one each.
ALTER TABLE review_items ADD COLUMN public_id uuid NOT NULL DEFAULT gen_random_uuid();
CREATE UNIQUE INDEX review_items_public_id_idx ON review_items (public_id);

-- The categories a user works within the queues of their role (`modstream review add-user
-- --queues hate,spam`); NULL means every category, including items without one.
ALTER TABLE review_users ADD COLUMN categories text[]
    CHECK (categories IS NULL OR cardinality(categories) > 0);
