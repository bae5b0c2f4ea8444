-- The words that moved the model's decision (pipelines/attribution.py; README "Verdicts"):
-- for escalated verdicts the model decided, raw-text offsets of up to three words and how much
-- leaving each out lowered the deciding probability, as
-- {"output": "toxicity.hate", "spans": [{"span": [start, end], "drop": 0.41}, ...]}.
-- Never the text. NULL for every other verdict, for rows stored before and when the extra
-- model call failed; existing rows stay valid.
ALTER TABLE verdicts ADD COLUMN model_spans jsonb;

-- The review service shows them to the claim holder (review/console.py), beside rule_hits.
GRANT SELECT (model_spans) ON verdicts TO modstream_review;

-- The worker writes them with the verdict (INSERT is granted on the whole table) and rewrites
-- them when re-scoring a pending verdict or rescanning (UPDATE is granted column by column).
GRANT UPDATE (model_spans) ON verdicts TO modstream_worker;
