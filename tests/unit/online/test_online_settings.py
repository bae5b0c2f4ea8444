"""online.settings: defaults from the brief, environment overrides, TLS files checked together."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from online.settings import OnlineSection, OnlineSettings


def test_defaults_and_environment_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    """Port 18070 and a 15 ms pace of model batches by default; MODSTREAM_ONLINE__* overrides
    them."""
    assert OnlineSection().port == 18070
    assert OnlineSection().max_wait_ms == 15.0
    monkeypatch.setenv("MODSTREAM_ONLINE__PORT", "19999")
    monkeypatch.setenv("MODSTREAM_ONLINE__QUEUE_LIMIT", "7")
    settings = OnlineSettings()
    assert (settings.online.port, settings.online.queue_limit) == (19999, 7)
    assert not settings.online.tls


def test_tls_files_must_exist_and_come_in_pairs(tmp_path: Path) -> None:
    """A key without a chain, a client CA without a key, or a missing file are refused."""
    key, chain = tmp_path / "k.pem", tmp_path / "c.pem"
    key.write_text("k")
    chain.write_text("c")
    assert OnlineSection(tls_private_key=key, tls_certificate_chain=chain).tls
    with pytest.raises(ValidationError):
        OnlineSection(tls_private_key=key)
    with pytest.raises(ValidationError):
        OnlineSection(tls_client_ca=chain)
    with pytest.raises(ValidationError):
        OnlineSection(tls_private_key=key, tls_certificate_chain=tmp_path / "missing.pem")
