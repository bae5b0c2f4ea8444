"""PostgreSQL cluster configuration and tool discovery (stack.postgres)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stack.certificates import ServerCertificate
from stack.errors import ToolMissingError
from stack.postgres import (
    PostgresServer,
    find_postgres_bin,
    render_pg_hba,
    render_postgresql_conf,
    render_tls_conf,
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


def test_hba_with_tls_requires_it_on_tcp() -> None:
    """With TLS every TCP rule is hostssl on loopback, and anything without TLS is rejected."""
    lines = render_pg_hba(tls=True).splitlines()
    rules = [line.split() for line in lines if line and not line.startswith("#")]
    assert ["hostnossl", "all", "all", "all", "reject"] in rules
    for rule in rules:
        if rule[-1] == "trust":
            assert rule[0] in ("local", "hostssl")
            assert rule[0] == "local" or rule[3] in ("127.0.0.1/32", "::1/128")


def test_tls_conf_names_the_certificate_or_turns_tls_off(tmp_path: Path) -> None:
    """The included TLS file turns ssl on with the server's files, or says ssl = off."""
    cert = ServerCertificate(tmp_path / "ca.crt", tmp_path / "s.crt", tmp_path / "s.key")
    text = render_tls_conf(cert)
    assert "ssl = on" in text.splitlines()
    assert f"ssl_cert_file = '{tmp_path / 's.crt'}'" in text
    assert f"ssl_key_file = '{tmp_path / 's.key'}'" in text
    assert "ssl = off" in render_tls_conf(None).splitlines()


def test_tls_dsns_verify_the_server(tmp_path: Path) -> None:
    """With postgres_tls every DSN asks for verify-full against the stack's CA."""
    server = PostgresServer(
        StackSettings(state_dir=tmp_path, postgres_port=25432, postgres_tls=True)
    )
    ca = tmp_path / "postgres" / "tls" / "ca.pem"
    assert server.dsn == (
        f"postgresql://modstream@127.0.0.1:25432/modstream?sslmode=verify-full&sslrootcert={ca}"
    )
    assert server.service_dsns()["worker"].startswith(
        "postgresql://modstream_worker_login@127.0.0.1:25432/modstream?sslmode=verify-full"
    )


def test_service_dsns_without_tls(tmp_path: Path) -> None:
    """Each service gets its own login in the DSN; without TLS there are no parameters."""
    server = PostgresServer(StackSettings(state_dir=tmp_path, postgres_port=25432))
    assert server.service_dsns() == {
        "worker": "postgresql://modstream_worker_login@127.0.0.1:25432/modstream",
        "review": "postgresql://modstream_review_login@127.0.0.1:25432/modstream",
        "analyst": "postgresql://modstream_analyst_login@127.0.0.1:25432/modstream",
        "online": "postgresql://modstream_online_login@127.0.0.1:25432/modstream",
    }


def _fake_cluster(tmp_path: Path, tls: bool) -> PostgresServer:
    server = PostgresServer(
        StackSettings(state_dir=tmp_path, postgres_port=25432, postgres_tls=tls)
    )
    server.data_dir.mkdir(parents=True)
    (server.data_dir / "postgresql.conf").write_text("port = 25432\n", encoding="utf-8")
    return server


def test_configure_tls_switches_files_and_marks_the_server_outdated(tmp_path: Path) -> None:
    """Toggling TLS rewrites certs, ssl and hba (one include line) and marks the other outdated."""
    plain = _fake_cluster(tmp_path, tls=False)
    plain._configure_tls()
    assert not plain.is_outdated(1)
    tls = PostgresServer(plain.settings.model_copy(update={"postgres_tls": True}))
    assert tls.is_outdated(1)
    tls._configure_tls()
    tls._configure_tls()
    conf = (tls.data_dir / "postgresql.conf").read_text(encoding="utf-8")
    assert conf.splitlines().count("include_if_exists = 'modstream_tls.conf'") == 1
    assert "ssl = on" in (tls.data_dir / "modstream_tls.conf").read_text(encoding="utf-8")
    assert "hostnossl" in (tls.data_dir / "pg_hba.conf").read_text(encoding="utf-8")
    assert (tls.tls_dir / "server.key").is_file()
    assert not tls.is_outdated(1)
    assert plain.is_outdated(1)
