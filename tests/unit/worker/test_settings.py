"""Tests for engine.settings: defaults, environment overrides, frozen sections, secrets."""

from __future__ import annotations

import os

import pydantic
import pytest

from common.settings import project_root
from engine.settings import BatchSettings
from pipelines.policy import PolicyThresholds
from worker.settings import WorkerSettings


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Start from no MODSTREAM_ variables so the developer's shell cannot leak in."""
    for name in list(os.environ):
        if name.startswith("MODSTREAM_"):
            monkeypatch.delenv(name)


def test_environment_overrides_nested_fields(monkeypatch: pytest.MonkeyPatch) -> None:
    """MODSTREAM_<SECTION>__<FIELD> sets a field, with type conversion."""
    monkeypatch.setenv("MODSTREAM_BATCH__MAX_ITEMS", "50")
    monkeypatch.setenv("MODSTREAM_TRITON__BREAKER_RESET_S", "2.5")
    monkeypatch.setenv("MODSTREAM_KAFKA__INPUT_TOPIC", "other.topic")
    s = WorkerSettings()
    assert s.batch.max_items == 50
    assert s.triton.breaker_reset_s == 2.5
    assert s.kafka.input_topic == "other.topic"
    assert s.batch.max_wait_s == BatchSettings().max_wait_s


def test_invalid_values_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Out-of-range batch limits fail validation at load time."""
    monkeypatch.setenv("MODSTREAM_BATCH__MAX_ITEMS", "0")
    with pytest.raises(pydantic.ValidationError):
        WorkerSettings()


def test_settings_are_frozen() -> None:
    """Neither the settings object nor its sections can be changed after loading."""
    s = WorkerSettings()
    with pytest.raises(pydantic.ValidationError):
        s.log_level = "debug"
    with pytest.raises(pydantic.ValidationError):
        s.batch.max_items = 1


def test_sections_forbid_unknown_fields() -> None:
    """A misspelt field in a section is an error, not silently ignored."""
    with pytest.raises(pydantic.ValidationError):
        BatchSettings(max_itemz=3)  # type: ignore[call-arg]


def test_dsn_is_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Postgres DSN is a SecretStr: its value does not appear in reprs."""
    monkeypatch.setenv("MODSTREAM_POSTGRES__DSN", "postgresql://u:hunter2@db/x")
    s = WorkerSettings()
    assert s.postgres.dsn.get_secret_value() == "postgresql://u:hunter2@db/x"
    assert "hunter2" not in repr(s)
    assert "hunter2" not in str(s.postgres)


def test_policy_section_is_the_thresholds(monkeypatch: pytest.MonkeyPatch) -> None:
    """The policy section is PolicyThresholds itself: environment values land in it, and
    thresholds that cannot work together are refused when the settings load."""
    assert WorkerSettings().policy == PolicyThresholds()
    monkeypatch.setenv("MODSTREAM_POLICY__BLOCK_HATE", "0.9")
    assert WorkerSettings().policy == PolicyThresholds(block_hate=0.9)
    monkeypatch.setenv("MODSTREAM_POLICY__FLAG_HATE", "0.95")
    with pytest.raises(pydantic.ValidationError, match="flag_hate must not exceed block_hate"):
        WorkerSettings()


def test_project_root_holds_migrations() -> None:
    """project_root() is the checkout: it contains the migrations folder."""
    assert (project_root() / "migrations").is_dir()


def test_a_shadow_model_is_named_apart_from_the_live_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """``triton.shadow_model_name`` (and version) set from the environment; a shadow that is
    the live model itself, or a version without a name, is refused at load."""
    monkeypatch.setenv("MODSTREAM_TRITON__SHADOW_MODEL_NAME", "moderation")
    monkeypatch.setenv("MODSTREAM_TRITON__SHADOW_MODEL_VERSION", "1")
    s = WorkerSettings()
    assert (s.triton.shadow_model_name, s.triton.shadow_model_version) == ("moderation", "1")
    monkeypatch.setenv("MODSTREAM_TRITON__SHADOW_MODEL_VERSION", "")
    with pytest.raises(pydantic.ValidationError, match="live model itself"):
        WorkerSettings()
    monkeypatch.setenv("MODSTREAM_TRITON__SHADOW_MODEL_NAME", "")
    monkeypatch.setenv("MODSTREAM_TRITON__SHADOW_MODEL_VERSION", "3")
    with pytest.raises(pydantic.ValidationError, match="needs triton\\.shadow_model_name"):
        WorkerSettings()
