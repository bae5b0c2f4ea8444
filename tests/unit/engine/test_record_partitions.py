"""Tests for engine.record_partitions: batches go where aiokafka's default partitioner sends."""

from __future__ import annotations

from aiokafka.partitioner import DefaultPartitioner

from engine.record_partitions import KeyPartitioner, group_by_partition


def test_keys_map_to_the_default_partitioners_choice() -> None:
    """For many keys and partition counts the partition equals DefaultPartitioner's."""
    default = DefaultPartitioner()
    ours = KeyPartitioner()
    for count in (1, 3, 4, 12):
        partitions = list(range(count))
        for i in range(300):
            key = f"group-{i}".encode()
            assert ours.partition(key, partitions) == default(key, partitions, partitions)


def test_the_hash_cache_stays_bounded_and_correct() -> None:
    """Past max_keys the memo is cleared, and answers stay those of an empty memo."""
    small = KeyPartitioner(max_keys=4)
    fresh = KeyPartitioner()
    for i in range(20):
        key = f"k{i}".encode()
        assert small.partition(key, [0, 1, 2, 3]) == fresh.partition(key, [0, 1, 2, 3])
    assert len(small._hashes) <= 4


def test_a_record_without_key_goes_to_one_of_the_partitions() -> None:
    """A key-less record is placed on some existing partition."""
    assert KeyPartitioner().partition(None, [5, 7]) in {5, 7}


def test_grouping_keeps_each_partitions_records_in_order() -> None:
    """Every record lands in exactly one group, and a key's records keep their order."""
    records = [(f"g{i % 5}".encode(), f"v{i}".encode()) for i in range(50)]
    groups = group_by_partition(records, [3, 1, 0, 2], KeyPartitioner())
    assert sorted(v for items in groups.values() for _, v in items) == sorted(v for _, v in records)
    default = DefaultPartitioner()
    for partition, items in groups.items():
        assert items == [r for r in records if default(r[0], [0, 1, 2, 3], []) == partition]
