"""PostgreSQL cluster configuration and tool discovery (stack.postgres)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stack.errors import ToolMissingError
from stack.postgres import (
    PostgresServer,
    find_postgres_bin,
    render_pg_hba,
    render_postgresql_conf,
)
from stack.settings import StackSettings


def _fake_install(root: Path, *majors: str) -> None:
    for major in majors:
        bin_dir = root / major / "bin"
        bin_dir.mkdir(parents=True)
        (bin_dir / "initdb").write_text("", encoding="utf-8")


def test_find_bin_picks_the_newest_major(tmp_path: Path) -> None:
    """With several Debian server versions installed, the highest major number wins."""
    _fake_install(tmp_path, "9", "15", "13")
    assert find_postgres_bin(tmp_path) == tmp_path / "15" / "bin"


def test_find_bin_without_initdb_says_how_to_install(tmp_path: Path) -> None:
    """No initdb anywhere is a ToolMissingError pointing at the bootstrap script."""
    with pytest.raises(ToolMissingError, match="bootstrap"):
        find_postgres_bin(tmp_path)


def test_conf_listens_on_loopback_port_and_socket(tmp_path: Path) -> None:
    """The appended settings bind 127.0.0.1 only, on the given port and socket folder."""
    text = render_postgresql_conf(25432, tmp_path / "run")
    assert "listen_addresses = '127.0.0.1'" in text
    assert "port = 25432" in text
    assert f"unix_socket_directories = '{tmp_path / 'run'}'" in text


def test_hba_trusts_loopback_only() -> None:
    """Every pg_hba rule is the local socket or a loopback address."""
    rules = [line.split() for line in render_pg_hba().splitlines() if line and line[0] != "#"]
    assert rules
    for rule in rules:
        assert rule[-1] == "trust"
        assert rule[0] == "local" or rule[3] in ("127.0.0.1/32", "::1/128")


def test_dsn_and_paths(tmp_path: Path) -> None:
    """The DSN names role and database modstream on the stack port; files stay in state_dir."""
    server = PostgresServer(StackSettings(state_dir=tmp_path, postgres_port=25432))
    assert server.dsn == "postgresql://modstream@127.0.0.1:25432/modstream"
    assert server.data_dir.is_relative_to(tmp_path / "postgres")
    assert server.socket_dir.is_relative_to(tmp_path / "postgres")
    assert server.marker == str(server.data_dir)
