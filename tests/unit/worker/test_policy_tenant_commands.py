"""Tests for ``modstream policy check`` (levels shown as numbers, refusals with exit 2) and
``modstream policy calibrate --tenant`` (one tenant's decisions through the marked SQL
fragment, a proposal beside the tenant's file and never over it, a database whose verdicts carry
no tenant refused), with a fake PostgreSQL: no network."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest

from engine.stores import moderator_decisions
from engine.stores.moderator_decisions import (
    TENANT_FILTER,
    ModeratorDecisionStore,
)
from modstream.cli import main
from pipelines.policy import PolicyThresholds
from pipelines.policy_file import read_policy
from pipelines.policy_levels import SHIPPED_LEVELS
from worker import policy_command
from worker.cli_args import ArgumentError
from worker.settings import WorkerSettings

_NOW = datetime(2026, 12, 7, tzinfo=UTC)


# -- policy check ----------------------------------------------------------------------------


def test_check_prints_each_categorys_level_and_numbers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A level is shown as the thresholds it gives; explicit ones are starred; ``off`` reads
    ``never``; categories the file leaves out show the configured level."""
    path = tmp_path / "acme.toml"
    path.write_text(
        '[levels]\noffensive = "low"\nspam = "off"\n[thresholds]\nflag_offensive = 0.75\n',
        encoding="utf-8",
    )
    assert main(["policy", "check", str(path)]) == 0
    rows = {line.split()[0]: line.split()[1:] for line in capsys.readouterr().out.splitlines()}
    low = SHIPPED_LEVELS.categories["offensive"].levels["low"]
    assert rows["offensive"] == ["low", "0.75*", f"{low['block_offensive']:g}"]
    assert rows["spam"] == ["off", "never", "never"]
    assert rows["hate"][:2] == ["medium", "(settings)"]
    assert rows["threat"][0] == "medium"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('[levels]\noffensive = "extreme"\n', "'extreme' is not a level"),
        ('[levels]\nswearing = "low"\n', "'swearing' is not a category"),
        ("[thresholds]\nflag_hate = 'high'\n", "flag_hate must be a number"),
        ('[levels]\noffensive = "low"\n[thresholds]\nflag_offensive = 0.99\n', "must not exceed"),
        ('[levels]\nself_harm = "off"\n', "self_harm cannot be 'off'"),
    ],
)
def test_check_refuses_with_the_reason_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, problem: str
) -> None:
    path = tmp_path / "acme.toml"
    path.write_text(text, encoding="utf-8")
    assert main(["policy", "check", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert problem in captured.err
    assert str(path) in captured.err


# -- the tenant filter of the decisions' query -----------------------------------------------


class _Pool:
    def __init__(self) -> None:
        self.fetches: list[tuple[str, tuple[Any, ...]]] = []

    async def fetch(self, query: str, *args: Any) -> list[dict[str, Any]]:
        self.fetches.append((query, args))
        return []


class _Database:
    def __init__(self, pool: _Pool) -> None:
        self._pool = pool

    def pool(self) -> _Pool:
        return self._pool


async def test_a_tenants_decisions_go_through_the_one_filter() -> None:
    """With a tenant the query is the shared one plus ``TENANT_FILTER`` and the tenant is $5;
    without one the query is unchanged."""
    pool = _Pool()
    store = ModeratorDecisionStore(_Database(pool))  # type: ignore[arg-type]
    await store.decisions(_NOW, _NOW, "moderation", None, tenant="acme")
    await store.decisions(_NOW, _NOW, "moderation", None)
    (tenant_query, tenant_args), (query, args) = pool.fetches
    assert tenant_query == query + TENANT_FILTER
    assert tenant_args == (*args, "acme")
    assert "$5" in TENANT_FILTER
    assert "$5" not in query


# -- calibrate --tenant ----------------------------------------------------------------------


class _FakeDatabase:
    def __init__(self, _settings: object) -> None:
        pass

    async def __aenter__(self) -> _FakeDatabase:
        return self

    async def __aexit__(
        self,
        _type: type[BaseException] | None,
        _exc: BaseException | None,
        _tb: TracebackType | None,
    ) -> None:
        return None


def _decisions(scores: list[tuple[float, bool]]) -> list[moderator_decisions.ModeratorDecision]:
    from pipelines.scores import ModelScores

    return [
        moderator_decisions.ModeratorDecision(
            "hate",
            ModelScores((0.2, 0.6, 0.2), (1.0, 0.0, 0.0, 0.0), (1.0 - score, 0.0, score)),
            harmful,
            "2",
        )
        for score, harmful in scores
    ]


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[str | None]:
    """Calibration over fake decisions (hate 0.00 .. 0.99, harmful from 0.70); the tenants
    the store was asked for."""
    tenants: list[str | None] = []

    class _Store:
        def __init__(self, _database: object) -> None:
            pass

        async def decisions(
            self, *_args: object, tenant: str | None = None
        ) -> list[moderator_decisions.ModeratorDecision]:
            tenants.append(tenant)
            return _decisions([(i / 100, i >= 70) for i in range(100)])

    monkeypatch.setattr(policy_command, "Database", _FakeDatabase)
    monkeypatch.setattr(policy_command, "ModeratorDecisionStore", _Store)
    _keep_logging(monkeypatch)
    return tenants


def _keep_logging(monkeypatch: pytest.MonkeyPatch) -> None:
    """The command configures logging onto the standard output; under ``capsys`` that is a
    capture closed after the test, which later tests' logs would be written to."""
    monkeypatch.setattr(policy_command, "configure_logging", lambda _level: None)


def _settings(folder: Path | None, live: Path | None = None) -> WorkerSettings:
    return WorkerSettings(policy_file={"tenants_dir": folder, "path": live})  # type: ignore[arg-type]


async def _calibrate(settings: WorkerSettings, out: Path, tenant: str | None) -> dict[str, Any]:
    return await policy_command.calibrate(
        settings,
        since=_NOW - timedelta(days=30),
        until=_NOW,
        target_precision=0.9,
        min_decisions=50,
        confidence=0.95,
        model=("moderation", ""),
        out=out,
        resamples=50,
        tenant=tenant,
    )


async def test_a_tenants_proposal_keeps_its_levels_and_leaves_the_live_file(
    tmp_path: Path, asked: list[str | None]
) -> None:
    """The store is asked for the tenant's decisions only; the proposal keeps the tenant
    file's levels, with the calibrated flag under [thresholds]; the live file is untouched."""
    live = tmp_path / "acme.toml"
    live_text = '[levels]\noffensive = "high"\n'
    live.write_text(live_text, encoding="utf-8")
    out = tmp_path / "acme.proposed.toml"
    report = await _calibrate(_settings(tmp_path), out, "acme")
    assert asked == ["acme"]
    assert report["tenant"] == "acme"
    assert live.read_text(encoding="utf-8") == live_text
    proposal = read_policy(out.read_text(encoding="utf-8"))
    assert dict(proposal.levels) == {"offensive": "high"}
    assert proposal.values["flag_hate"] == pytest.approx(0.67)
    high = SHIPPED_LEVELS.categories["offensive"].levels["high"]
    assert report["current"]["flag_offensive"] == high["flag_offensive"]


async def test_a_tenant_without_a_file_starts_from_the_default_tenants(
    tmp_path: Path, asked: list[str | None]
) -> None:
    """What the tenant decides with now is the default tenant's file: its proposal keeps it."""
    folder = tmp_path / "tenants"
    folder.mkdir()
    default = tmp_path / "policy.toml"
    default.write_text('[levels]\nspam = "low"\n', encoding="utf-8")
    out = folder / "kids.proposed.toml"
    await _calibrate(_settings(folder, default), out, "kids")
    assert dict(read_policy(out.read_text(encoding="utf-8")).levels) == {"spam": "low"}


async def test_a_tenants_proposal_never_goes_over_its_live_file(
    tmp_path: Path, asked: list[str | None]
) -> None:
    with pytest.raises(ArgumentError, match="live policy file"):
        await _calibrate(_settings(tmp_path), tmp_path / "acme.toml", "acme")
    assert asked == []


def test_the_command_writes_beside_the_tenants_file_by_default(
    tmp_path: Path,
    asked: list[str | None],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``--tenant acme`` with no ``--out``: ``<tenants_dir>/acme.proposed.toml``."""
    monkeypatch.setenv("MODSTREAM_POLICY_FILE__TENANTS_DIR", str(tmp_path))
    assert main(["policy", "calibrate", "--tenant", "acme", "--resamples", "20"]) == 0
    assert (tmp_path / "acme.proposed.toml").exists()
    assert not (tmp_path / "acme.toml").exists()
    assert asked == ["acme"]
    assert "acme.proposed.toml" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "env", "problem"),
    [
        (["--tenant", "acme"], False, "MODSTREAM_POLICY_FILE__TENANTS_DIR"),
        (["--tenant", "Not A Tenant"], True, "tenant id"),
    ],
)
def test_the_command_refuses_a_tenant_it_cannot_calibrate(
    tmp_path: Path,
    asked: list[str | None],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    env: bool,
    problem: str,
) -> None:
    if env:
        monkeypatch.setenv("MODSTREAM_POLICY_FILE__TENANTS_DIR", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    assert main(["policy", "calibrate", *argv]) == 2
    assert problem in capsys.readouterr().err
    assert asked == []
    assert list(tmp_path.iterdir()) == []


def test_the_default_thresholds_are_unchanged() -> None:
    """The default tenant without a policy file decides with the shipped defaults."""
    assert WorkerSettings().policy == PolicyThresholds()
