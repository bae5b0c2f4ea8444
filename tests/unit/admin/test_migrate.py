"""Tests for admin.migrate's pure part: discovering and ordering migration files."""

from __future__ import annotations

from pathlib import Path

import pytest

from admin.migrate import Migration, MigrationError, discover
from common.settings import project_root


def _write(folder: Path, name: str, sql: str = "SELECT 1;") -> None:
    (folder / name).write_text(sql, encoding="utf-8")


def test_discovers_in_version_order(tmp_path: Path) -> None:
    """Files are returned ordered by version with name and contents parsed."""
    _write(tmp_path, "0002_second.sql", "SELECT 2;")
    _write(tmp_path, "0010_tenth.sql", "SELECT 10;")
    _write(tmp_path, "0001_first.sql", "SELECT 1;")
    found = discover(tmp_path)
    assert [(m.version, m.name, m.sql) for m in found] == [
        (1, "first", "SELECT 1;"),
        (2, "second", "SELECT 2;"),
        (10, "tenth", "SELECT 10;"),
    ]


def test_non_sql_files_are_skipped(tmp_path: Path) -> None:
    """Files that are not .sql (READMEs, editor backups) are not migrations."""
    _write(tmp_path, "0001_first.sql")
    _write(tmp_path, "README.md", "# notes")
    assert [m.version for m in discover(tmp_path)] == [1]


@pytest.mark.parametrize("name", ["1_short.sql", "0001-dash.sql", "0001_Upper.sql", "init.sql"])
def test_misnamed_sql_file_is_an_error(tmp_path: Path, name: str) -> None:
    """A .sql file not named NNNN_lowercase_name.sql is refused, not silently skipped."""
    _write(tmp_path, "0001_first.sql")
    _write(tmp_path, name)
    with pytest.raises(MigrationError, match="NNNN"):
        discover(tmp_path)


def test_duplicate_versions_are_an_error(tmp_path: Path) -> None:
    """Two files with the same version number are refused."""
    _write(tmp_path, "0001_first.sql")
    _write(tmp_path, "0001_other.sql")
    with pytest.raises(MigrationError, match="duplicate"):
        discover(tmp_path)


def test_checksum_tracks_content() -> None:
    """The checksum changes when the SQL changes and only then."""
    a = Migration(1, "x", "SELECT 1;")
    assert a.checksum == Migration(1, "x", "SELECT 1;").checksum
    assert a.checksum != Migration(1, "x", "SELECT 2;").checksum


def test_shipped_migrations_are_well_formed() -> None:
    """The repository's migrations folder parses, starts at 1 and ascends strictly (gaps are
    allowed: areas own number ranges, e.g. review 2-9, reliability 10-19)."""
    found = discover(project_root() / "migrations")
    versions = [m.version for m in found]
    assert versions[0] == 1
    assert versions == sorted(set(versions))
    assert all(m.sql.strip() for m in found)
