"""A real Prometheus for the demo: Debian's ``prometheus`` scraping the worker's ``/metrics``.

``modstream demo --with-prometheus`` starts it on ``127.0.0.1:<stack.prometheus_port>`` with a
configuration written under ``<state_dir>/prometheus``: one job, ``modstream-worker``, scraped
every second (the demo lasts seconds, not hours), and the project's alert rules
(``deploy/k8s/base/monitoring/alerts.yml``) loaded, so their recording rule and alerts are
evaluated too. :func:`query` asks its HTTP API an instant PromQL query. The binary comes from
Debian's package (``scripts/bootstrap.sh`` installs it); nothing is downloaded.
"""

from __future__ import annotations

import json
import shutil
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from common.settings import project_root
from stack.errors import StackError, ToolMissingError
from stack.service import LocalService
from stack.settings import StackSettings

__all__ = ["ALERT_RULES", "PrometheusServer", "QueryError", "Sample", "query"]

ALERT_RULES = project_root() / "deploy" / "k8s" / "base" / "monitoring" / "alerts.yml"
_PROBE_TIMEOUT_S = 2.0


class QueryError(StackError, RuntimeError):
    """Prometheus refused a query or could not be asked."""


@dataclass(frozen=True, slots=True)
class Sample:
    """One series of an instant query's answer."""

    labels: Mapping[str, str]
    value: float


def query(base_url: str, promql: str, timeout_s: float = 5.0) -> list[Sample]:
    """The instant vector (or scalar) ``promql`` evaluates to now."""
    url = f"{base_url}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:  # noqa: S310 (loopback)
            body = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        detail = json.loads(exc.read() or b"{}").get("error", exc.reason)
        raise QueryError(f"{promql}: {detail}") from exc
    except (OSError, ValueError) as exc:
        raise QueryError(f"{promql}: {exc}") from exc
    data = body["data"]
    if data["resultType"] == "scalar":
        return [Sample({}, float(data["result"][1]))]
    if data["resultType"] != "vector":
        raise QueryError(f"{promql}: a {data['resultType']}, not an instant vector")
    return [Sample(dict(r["metric"]), float(r["value"][1])) for r in data["result"]]


class PrometheusServer(LocalService):
    """Prometheus scraping ``targets`` (``host:port`` of /metrics endpoints) every second."""

    name = "prometheus"
    start_timeout_s = 60.0

    def __init__(self, settings: StackSettings, targets: Sequence[str]) -> None:
        super().__init__(settings)
        self.targets = list(targets)
        self.config_path = self.directory / "prometheus.yml"
        self.data_dir = self.directory / "data"

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.settings.prometheus_port}"

    @property
    def url(self) -> str:
        return f"http://{self.endpoint}"

    @property
    def log_path(self) -> Path:
        return self.directory / "prometheus.log"

    @property
    def marker(self) -> str:
        return f"--storage.tsdb.path={self.data_dir}"

    def ports(self) -> tuple[int, ...]:
        return (self.settings.prometheus_port,)

    def check(self) -> None:
        if shutil.which("prometheus") is None:
            raise ToolMissingError(
                "prometheus not found: scripts/bootstrap.sh installs Debian's prometheus"
            )

    def config(self) -> str:
        """The configuration file's text (JSON is YAML, and needs no YAML writer here)."""
        document = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(ALERT_RULES)],
            "scrape_configs": [
                {
                    "job_name": "modstream-worker",
                    "metrics_path": "/metrics",
                    "static_configs": [{"targets": self.targets}],
                }
            ],
        }
        return json.dumps(document, indent=2) + "\n"

    def prepare(self) -> None:
        self.check()
        self.directory.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(self.config(), encoding="utf-8")

    def is_outdated(self, pid: int) -> bool:
        """A running server whose configuration differs (other targets) is restarted."""
        try:
            return self.config_path.read_text(encoding="utf-8") != self.config()
        except OSError:
            return True

    def command(self) -> tuple[Sequence[str], Mapping[str, str] | None]:
        argv = [
            "prometheus",
            f"--config.file={self.config_path}",
            self.marker,
            f"--web.listen-address={self.endpoint}",
            "--storage.tsdb.retention.time=1d",
        ]
        return argv, None

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(  # noqa: S310 (fixed http://127.0.0.1 URL)
                f"{self.url}/-/ready", timeout=_PROBE_TIMEOUT_S
            ) as response:
                return int(response.status) == 200
        except (urllib.error.URLError, OSError, ValueError):
            return False
