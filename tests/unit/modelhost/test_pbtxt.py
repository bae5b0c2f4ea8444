"""``modelhost.pbtxt`` reads every ``config.pbtxt`` of the project as Triton's own parser does."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf import json_format, text_format
from tritonclient.grpc import model_config_pb2

from common.settings import project_root
from modelhost.pbtxt import PbtxtError, parse_pbtxt, read_model_config

CONFIGS = sorted(
    [
        *project_root().glob("model_repository/*/config.pbtxt"),
        *project_root().glob("model_repository/*/configs/*.pbtxt"),
        *project_root().glob("tests/fixtures/model_repository/*/config.pbtxt"),
    ]
)


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: str(p.relative_to(project_root())))
def test_every_project_config_reads_as_tritons_parser_reads_it(path: Path) -> None:
    """What this reader makes of each config of the project, read back as Triton's JSON with
    Triton's ``ModelConfig`` schema, is the message protobuf's own text-format parser makes."""
    expected = text_format.Parse(path.read_text(encoding="utf-8"), model_config_pb2.ModelConfig())
    if not expected.name:
        expected.name = path.parent.name
    got = json_format.ParseDict(read_model_config(path), model_config_pb2.ModelConfig())
    assert got == expected


def test_lists_maps_strings_and_comments() -> None:
    """A field written once but repeated in the schema is a list; written twice, a list;
    ``parameters`` a map; strings keep their escapes; comments are skipped."""
    config = parse_pbtxt(
        """
        # a comment
        name: "m"  # another
        input [ { name: "TEXT" dims: [ 1 ] } ]
        output { name: "A" dims: [ 3 ] }
        instance_group [ { count: 2 kind: KIND_GPU gpus: [ 0, 1 ] } ]
        parameters: { key: "prefix" value: { string_value: "query: \\"x\\"" } }
        parameters { key: "n" value: { string_value: '64' } }
        dynamic_batching { preferred_batch_size: [ 64, 128 ] max_queue_delay_microseconds: 5000 }
        optimization { execution_accelerators { gpu_execution_accelerator : [ { name : "x" } ] } }
        """
    )
    assert config["input"] == [{"name": "TEXT", "dims": [1]}]
    assert config["output"] == [{"name": "A", "dims": [3]}]
    assert config["instance_group"] == [{"count": 2, "kind": "KIND_GPU", "gpus": [0, 1]}]
    assert config["parameters"] == {
        "prefix": {"string_value": 'query: "x"'},
        "n": {"string_value": "64"},
    }
    assert config["dynamic_batching"]["preferred_batch_size"] == [64, 128]


@pytest.mark.parametrize(
    "text", ['name: "unclosed', "input [ { name: 1 ", "parameters { value: {} }", "name: @"]
)
def test_text_that_is_not_a_config_is_a_typed_error(text: str) -> None:
    """Unterminated strings, lists or messages, map entries without a key and stray characters
    raise ``PbtxtError``."""
    with pytest.raises(PbtxtError):
        parse_pbtxt(text)
