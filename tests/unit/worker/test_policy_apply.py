"""``modstream policy apply`` over a fake recorder: a bad proposal or a refused token changes
nothing; an applied one is recorded with who and what, and written headed by it."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from common.api_tokens import digest
from engine.stores.policy_applications import Applied, NotAnAdmin, PolicyApplication
from modstream.cli import main
from pipelines.policy import PolicyThresholds
from pipelines.policy_file import PolicyFileError, load_policy_file
from worker import policy_command
from worker.policy_apply import apply_proposal, read_proposal

TOKEN = "msr_admin-token"
AT = datetime(2026, 12, 7, 9, 30, tzinfo=UTC)


class FakeRecorder:
    """Accepts ``TOKEN`` as the admin ``ada``'s; records what it was given."""

    def __init__(self) -> None:
        self.recorded: list[tuple[str, PolicyApplication]] = []

    async def record(
        self, token_sha256: str, application: PolicyApplication, then: Callable[[Applied], None]
    ) -> Applied:
        if token_sha256 != digest(TOKEN):
            raise NotAnAdmin("not the API token of an enabled admin")
        applied = Applied("ada", AT)
        then(applied)  # a failure here leaves nothing recorded
        self.recorded.append((token_sha256, application))
        return applied


def _files(tmp_path: Path, proposal: str) -> tuple[Path, Path]:
    live = tmp_path / "policy.toml"
    live.write_text("[thresholds]\nflag_hate = 0.5\n", encoding="utf-8")
    path = tmp_path / "policy.proposal.toml"
    path.write_text(proposal, encoding="utf-8")
    return path, live


async def test_an_admin_applies_a_proposal_recorded_and_written_headed_by_who(
    tmp_path: Path,
) -> None:
    """The live file becomes the proposal under a header naming the admin, the time and the
    proposal's hash; the record holds the thresholds before and after."""
    path, live = _files(tmp_path, "# proposed\n[thresholds]\nflag_hate = 0.67\n")
    recorder = FakeRecorder()
    proposal = read_proposal(path, PolicyThresholds())
    done = await apply_proposal(
        proposal, target=live, base=PolicyThresholds(), token=TOKEN, store=recorder
    )
    assert (done.applied_by, done.applied_at) == ("ada", AT)
    text = live.read_text(encoding="utf-8")
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    assert text.splitlines()[0] == (
        f"# applied by ada at {AT.isoformat()} with modstream policy apply, "
        f"from policy.proposal.toml (sha256 {sha})"
    )
    assert text.endswith(path.read_text(encoding="utf-8"))
    assert load_policy_file(live, PolicyThresholds()).flag_hate == 0.67
    [(token_sha256, application)] = recorder.recorded
    assert token_sha256 == digest(TOKEN)  # the token itself never leaves the command
    assert application.proposal_sha256 == sha
    assert (application.previous["flag_hate"], application.thresholds["flag_hate"]) == (0.5, 0.67)


@pytest.mark.parametrize(
    ("proposal", "reason"),
    [
        ("[thresholds]\nflag_hat = 0.6\n", "'flag_hat' is not a threshold"),
        ("[thresholds]\nflag_hate = 1.5\n", "flag_hate"),
        ("[thresholds]\nflag_offensive = 0.99\nblock_offensive = 0.9\n", "[thresholds]"),
        ("thresholds = 1\n", "[thresholds] must be a table"),
        ("[thresholds\n", "not TOML"),
    ],
)
def test_a_bad_proposal_is_refused_with_its_reason(
    tmp_path: Path, proposal: str, reason: str
) -> None:
    """A proposal the services could not load is refused before anything is recorded."""
    path, _ = _files(tmp_path, proposal)
    with pytest.raises(PolicyFileError, match=reason.replace("[", r"\[")):
        read_proposal(path, PolicyThresholds())


async def test_a_token_that_is_not_an_admins_changes_nothing(tmp_path: Path) -> None:
    """A refused token leaves the live file as it was and nothing recorded."""
    path, live = _files(tmp_path, "[thresholds]\nflag_hate = 0.67\n")
    before = live.read_bytes()
    recorder = FakeRecorder()
    with pytest.raises(NotAnAdmin):
        await apply_proposal(
            read_proposal(path, PolicyThresholds()),
            target=live,
            base=PolicyThresholds(),
            token="msr_moderator",
            store=recorder,
        )
    assert live.read_bytes() == before
    assert recorder.recorded == []


async def test_the_live_file_is_not_a_proposal(tmp_path: Path) -> None:
    """Applying the live file onto itself is refused (there is nothing to review)."""
    _, live = _files(tmp_path, "")
    recorder = FakeRecorder()
    with pytest.raises(PolicyFileError, match="is the live policy file"):
        await apply_proposal(
            read_proposal(live, PolicyThresholds()),
            target=live,
            base=PolicyThresholds(),
            token=TOKEN,
            store=recorder,
        )
    assert recorder.recorded == []


@pytest.fixture
def _no_logging_setup(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(policy_command, "configure_logging", lambda _level: None)


@pytest.mark.usefixtures("_no_logging_setup")
def test_calibrate_refuses_to_write_the_live_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--out`` naming the live policy file is a usage error before any database is asked."""
    live = tmp_path / "policy.toml"
    live.write_text("[thresholds]\n", encoding="utf-8")
    monkeypatch.setenv("MODSTREAM_POLICY_FILE__PATH", str(live))
    monkeypatch.setenv("MODSTREAM_POSTGRES__DSN", "postgresql://nobody@127.0.0.1:1/none")
    assert main(["policy", "calibrate", "--out", str(live)]) == 2
    assert "is the live policy file" in capsys.readouterr().err
    assert live.read_text(encoding="utf-8") == "[thresholds]\n"


@pytest.mark.usefixtures("_no_logging_setup")
def test_apply_without_a_live_file_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No ``policy_file.path`` and no ``--to``: nowhere to apply, refused (exit 2)."""
    path, _ = _files(tmp_path, "[thresholds]\nflag_hate = 0.67\n")
    monkeypatch.delenv("MODSTREAM_POLICY_FILE__PATH", raising=False)
    monkeypatch.setattr("sys.stdin", _Stdin(TOKEN))
    assert main(["policy", "apply", str(path)]) == 2
    assert "no live policy file" in capsys.readouterr().err


class _Stdin:
    def __init__(self, line: str) -> None:
        self._line = line

    def isatty(self) -> bool:
        return False

    def readline(self) -> str:
        return self._line + "\n"
