"""stack.prometheus: the demo's Prometheus configuration is one promtool accepts, scraping the
worker and loading the project's alert rules; a missing binary is a clear error."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from stack.errors import ToolMissingError
from stack.prometheus import ALERT_RULES, PrometheusServer
from stack.settings import StackSettings


def _server(tmp_path: Path) -> PrometheusServer:
    return PrometheusServer(
        StackSettings(state_dir=tmp_path, prometheus_port=29090), ["127.0.0.1:18080"]
    )


def test_the_configuration_scrapes_the_worker_and_loads_the_alert_rules(tmp_path: Path) -> None:
    """One job on the given target every second, the alert rules file, and `promtool check
    config` (Debian's prometheus package) accepts the file and the rules it names."""
    server = _server(tmp_path)
    config = json.loads(server.config())
    assert config["global"]["scrape_interval"] == "1s"
    (job,) = config["scrape_configs"]
    assert job["static_configs"] == [{"targets": ["127.0.0.1:18080"]}]
    assert config["rule_files"] == [str(ALERT_RULES)]
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool not found: scripts/bootstrap.sh installs Debian's prometheus")
    server.prepare()
    done = subprocess.run(
        [promtool, "check", "config", str(server.config_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout + done.stderr


def test_the_command_listens_on_the_stack_port_with_its_own_data(tmp_path: Path) -> None:
    """Loopback on stack.prometheus_port; the TSDB under the state folder marks the process."""
    server = _server(tmp_path)
    argv, _ = server.command()
    assert "--web.listen-address=127.0.0.1:29090" in argv
    assert server.marker in argv
    assert str(tmp_path) in server.marker
    assert server.ports() == (29090,)


def test_a_machine_without_prometheus_gets_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the binary on PATH, start-up stops at once and names the install step."""
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ToolMissingError, match="bootstrap"):
        _server(tmp_path).check()
