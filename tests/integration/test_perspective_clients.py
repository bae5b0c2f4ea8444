"""Perspective clients nobody here wrote, unchanged but for the endpoint, against a running
stack: npm ``perspective-api-client`` 3.1.0 (node) and PyPI ``perspective`` 1.0.3.

The npm client (``tests/perspective_clients``, installed by its ``install.sh``) posts to Google's
fixed URL with axios; ``analyze.mjs`` swaps the origin with an axios request interceptor. The
PyPI client keeps its URL template in ``APIClient.url``, set here. Neither is otherwise touched.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import urllib.error
from pathlib import Path
from typing import Any

import pytest
from perspective import PerspectiveAPI

from tests.integration.online_support import make_token, running_service
from tests.integration.perspective_support import count_rows, perspective_settings

pytestmark = pytest.mark.integration

CLIENTS = Path(__file__).resolve().parents[1] / "perspective_clients"
INSULT = "you are a stupid muppet and everyone knows it"
"""The fixture model finds `stupid` offensive (TOXICITY) and `muppet` an insult (HARMS)."""


def _node(base: str, key: str, options: dict[str, Any]) -> dict[str, Any]:
    node = shutil.which("node")
    assert node is not None, "node is required (tests/perspective_clients/install.sh)"
    assert (CLIENTS / "node_modules" / "perspective-api-client").is_dir(), (
        "run tests/perspective_clients/install.sh (make test-deps)"
    )
    done = subprocess.run(
        [node, str(CLIENTS / "analyze.mjs"), base, key, json.dumps(options)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=CLIENTS,
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _python(base: str, key: str, text: str, **options: Any) -> dict[str, Any]:
    client = PerspectiveAPI(key)
    client.api_client.url = f"{base}/v1alpha1/{{endpoint}}"
    answer: dict[str, Any] = client.analyze_comment(text, **options)
    return answer


async def test_the_npm_client_gets_scores_and_errors(database: str, topics: dict[str, str]) -> None:
    """perspective-api-client's default call (TOXICITY, doNotStore true) is scored and stores
    nothing; a list of attributes answers each; a bad key is its ResponseError with 401."""
    settings = perspective_settings(database, topics)
    token = await make_token(database)
    async with running_service(settings) as service:
        base = f"http://127.0.0.1:{service.perspective_port}"
        before = await count_rows(database)
        default = await asyncio.to_thread(_node, base, token, {"text": INSULT})
        unstored = await count_rows(database)
        several = await asyncio.to_thread(
            _node,
            base,
            token,
            {"text": "我迟早弄死你", "attributes": ["threat", "toxicity"], "doNotStore": False},
        )
        refused = await asyncio.to_thread(_node, base, "not-a-key", {"text": INSULT})
        after = await count_rows(database)
    assert default["ok"], default
    assert default["answer"]["attributeScores"]["TOXICITY"]["summaryScore"]["value"] > 0.8
    assert unstored == before
    assert several["ok"], several
    scores = several["answer"]["attributeScores"]
    assert set(scores) == {"THREAT", "TOXICITY"}
    assert scores["THREAT"]["summaryScore"]["value"] >= 0.9
    assert several["answer"]["detectedLanguages"] == ["zh"]
    assert after["verdicts"] == before["verdicts"] + 1
    assert (refused["ok"], refused["name"], refused["status"]) == (False, "ResponseError", 401)
    assert "API key not valid" in refused["message"]


async def test_the_pypi_client_gets_scores_spans_and_errors(
    database: str, topics: dict[str, str]
) -> None:
    """PyPI ``perspective``'s analyze_comment with every option it sends (attributes with a
    threshold, span annotations, languages, doNotStore, client token, session, community) is
    answered; its ``score`` helper reads the summary scores; an unsupported language is the
    HTTP 400 its urllib raises."""
    settings = perspective_settings(database, topics)
    token = await make_token(database)
    async with running_service(settings) as service:
        base = f"http://127.0.0.1:{service.perspective_port}"
        answer = await asyncio.to_thread(
            _python,
            base,
            token,
            INSULT,
            requested_attributes={"INSULT": {}, "THREAT": {"scoreThreshold": 0.5}},
            span_annotations=True,
            languages=["en"],
            do_not_store=True,
            client_token="t-1",
            session_id="s-1",
            community_id="forum-1",
        )
        simple = await asyncio.to_thread(
            lambda: _score(base, token, "have a nice day", ["TOXICITY", "PROFANITY"])
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            await asyncio.to_thread(_python, base, token, INSULT, languages=["de"])
    assert set(answer["attributeScores"]) == {"INSULT"}  # THREAT is under its threshold
    assert answer["attributeScores"]["INSULT"]["summaryScore"]["value"] > 0.5
    assert answer["clientToken"] == "t-1"
    assert answer["languages"] == ["en"]
    assert set(simple) == {"TOXICITY", "PROFANITY"}
    assert all(0.0 <= v < 0.5 for v in simple.values())
    assert refused.value.code == 400
    error = json.loads(refused.value.read())["error"]
    assert error["status"] == "INVALID_ARGUMENT"
    assert "does not support request languages: de" in error["message"]


def _score(base: str, key: str, text: str, tests: list[str]) -> dict[str, float]:
    client = PerspectiveAPI(key)
    client.api_client.url = f"{base}/v1alpha1/{{endpoint}}"
    scores: dict[str, float] = client.score(text, tests=tests)
    return scores
