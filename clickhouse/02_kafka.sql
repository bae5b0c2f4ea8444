-- ClickHouse: consume Kafka `moderation.verdicts` into moderation_verdicts and Kafka
-- `moderation.erasures` into moderation_erasures (01_verdicts.sql). Set the broker list, topics and
-- consumer groups for your deployment before applying; each record is one JSON document (a
-- verdict: pipelines/verdict_codec.py, schema_version 1), read whole and parsed below, so a field
-- added by a later schema version breaks nothing here.

CREATE TABLE moderation_verdicts_queue
(
    record String
)
ENGINE = Kafka
SETTINGS kafka_broker_list = 'kafka:9092',
         kafka_topic_list = 'moderation.verdicts',
         kafka_group_name = 'modstream-clickhouse',
         kafka_format = 'JSONAsString',
         kafka_num_consumers = 1,
         kafka_handle_error_mode = 'stream';

-- Every record of schema version 1 becomes a row; the Kafka partition and offset of the record
-- are the row's version (the newest state of a verdict wins). A record of an erased sender sent
-- until the erasure is dropped (senders never erased meet erased_at's default, 1970).
CREATE MATERIALIZED VIEW moderation_verdicts_queue_mv TO moderation_verdicts AS
SELECT
    JSONExtractString(record, 'source_topic')                        AS source_topic,
    JSONExtractInt(record, 'source_partition')                       AS source_partition,
    JSONExtractInt(record, 'source_offset')                          AS source_offset,
    parseDateTime64BestEffort(JSONExtractString(record, 'sent_at'), 6, 'UTC') AS sent_at,
    parseDateTime64BestEffort(JSONExtractString(record, 'created_at'), 6, 'UTC') AS created_at,
    JSONExtractString(record, 'message_id')                          AS message_id,
    JSONExtractString(record, 'group_id')                            AS group_id,
    JSONExtractString(record, 'sender_id')                           AS sender_id,
    JSONExtractString(record, 'decision')                            AS decision,
    JSONExtractString(record, 'decided_by')                          AS decided_by,
    JSONExtractBool(record, 'escalate')                              AS escalated,
    JSONExtract(record, 'category', 'Nullable(String)')              AS category,
    JSONExtractFloat(record, 'priority')                             AS priority,
    JSONExtract(record, 'reasons', 'Array(String)')                  AS reasons,
    JSONExtract(record, 'rule_hits',
        'Array(Tuple(rule_id String, category String, severity String, action String))')
                                                                     AS rule_hits,
    JSONExtract(record, 'model_name', 'Nullable(String)')            AS model_name,
    JSONExtract(record, 'model_version', 'Nullable(String)')         AS model_version,
    if(JSONHas(record, 'tenant'), JSONExtractString(record, 'tenant'), 'default') AS tenant,
    toUInt32(_partition)                                             AS kafka_partition,
    _offset                                                          AS kafka_offset
FROM moderation_verdicts_queue
LEFT JOIN (SELECT sender_id, max(erased_at) AS erased_at FROM moderation_erasures GROUP BY sender_id)
    AS erasure ON erasure.sender_id = JSONExtractString(record, 'sender_id')
WHERE length(_error) = 0 AND JSONExtractUInt(record, 'schema_version') = 1
  AND parseDateTime64BestEffort(JSONExtractString(record, 'sent_at'), 6, 'UTC') > erasure.erased_at;

-- Erasures: {"schema_version": 1, "sender_id": "...", "erased_at": "<ISO 8601>"}, keyed by
-- sender_id; whoever erases a sender's data in PostgreSQL publishes one.
CREATE TABLE moderation_erasures_queue
(
    record String
)
ENGINE = Kafka
SETTINGS kafka_broker_list = 'kafka:9092',
         kafka_topic_list = 'moderation.erasures',
         kafka_group_name = 'modstream-clickhouse-erasures',
         kafka_format = 'JSONAsString',
         kafka_num_consumers = 1,
         kafka_handle_error_mode = 'stream';

CREATE MATERIALIZED VIEW moderation_erasures_queue_mv TO moderation_erasures AS
SELECT
    JSONExtractString(record, 'sender_id')                           AS sender_id,
    parseDateTime64BestEffort(JSONExtractString(record, 'erased_at'), 6, 'UTC') AS erased_at,
    toUInt32(_partition)                                             AS kafka_partition,
    _offset                                                          AS kafka_offset
FROM moderation_erasures_queue
WHERE length(_error) = 0 AND JSONExtractUInt(record, 'schema_version') = 1
  AND JSONExtractString(record, 'sender_id') != '';
