"""The committed modules of moderation.proto equal a fresh `python -m online.api.protoc`."""

from __future__ import annotations

from pathlib import Path

from common.settings import project_root
from online.api.protoc import PROTO, generate


def test_committed_generated_modules_equal_a_fresh_generation(tmp_path: Path) -> None:
    """Regenerating into a temporary folder gives byte-identical _pb2.py and _pb2.pyi files."""
    fresh = generate(tmp_path)
    assert [p.name for p in fresh] == ["moderation_pb2.py", "moderation_pb2.pyi"]
    for path in fresh:
        committed = project_root() / path.relative_to(tmp_path)
        assert committed.read_bytes() == path.read_bytes(), f"{committed} is stale: regenerate"
    assert (project_root() / PROTO).is_file()
