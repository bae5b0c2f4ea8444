"""Analyze requests: Perspective's fields parsed, every refusal a 400 naming the field only."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from online.perspective.errors import PerspectiveError
from online.perspective.languages import detect_languages, primary_language
from online.perspective.quota import KeyQuota
from online.perspective.request import parse_request

SECRET = "a comment nobody may read in an error"


def _body(**fields: Any) -> bytes:
    document: dict[str, Any] = {
        "comment": {"text": SECRET},
        "requestedAttributes": {"TOXICITY": {}},
    }
    document.update(fields)
    return orjson.dumps(document)


def test_every_field_perspective_defines_is_read() -> None:
    request = parse_request(
        _body(
            comment={"text": SECRET, "type": "PLAIN_TEXT"},
            requestedAttributes={
                "TOXICITY": {"scoreType": "PROBABILITY", "scoreThreshold": 0.4},
                "INSULT": None,
            },
            languages=["en", "zh-Hans"],
            spanAnnotations=True,
            doNotStore=True,
            context={"entries": [{"text": "earlier", "type": "PLAIN_TEXT"}]},
            clientToken="c-1",
            communityId="forum",
            sessionId="s-1",
        )
    )
    assert request.text == SECRET
    assert [(a.name, a.score_threshold) for a in request.attributes] == [
        ("TOXICITY", 0.4),
        ("INSULT", None),
    ]
    assert request.languages == ("en", "zh-Hans")
    assert request.span_annotations
    assert request.do_not_store
    assert (request.client_token, request.community_id, request.session_id) == (
        "c-1",
        "forum",
        "s-1",
    )


def test_defaults_store_the_call_and_detect_languages() -> None:
    request = parse_request(_body())
    assert not request.do_not_store
    assert not request.span_annotations
    assert request.languages == ()


@pytest.mark.parametrize(
    ("body", "named"),
    [
        (b"{nope", "Invalid JSON"),
        (b"[]", "expected an object"),
        (_body(comment={"text": "  "}), "non-empty"),
        (_body(comment={"text": SECRET, "type": "HTML"}), "HTML"),
        (_body(requestedAttributes={}), "at least one attribute"),
        (_body(requestedAttributes={"TOXICITY": {"scoreType": "STD_DEV_SCORE"}}), "score type"),
        (_body(requestedAttributes={"TOXICITY": {"scoreThreshold": 2}}), "scoreThreshold"),
        (_body(requestedAttributes={"TOXICITY": {"nope": 1}}), "nope"),
        (_body(languages="en"), "languages"),
        (_body(doNotStore="yes"), "doNotStore"),
        (_body(clientToken=3), "clientToken"),
        (_body(communityId="c" * 500), "communityId"),
        (_body(surprise=1), "surprise"),
    ],
)
def test_bad_requests_are_400_naming_the_field_never_the_text(body: bytes, named: str) -> None:
    with pytest.raises(PerspectiveError) as refused:
        parse_request(body)
    error = refused.value.body()["error"]
    assert isinstance(error, dict)
    assert (error["code"], error["status"]) == (400, "INVALID_ARGUMENT")
    assert named in str(error["message"])
    assert SECRET not in orjson.dumps(error).decode()


def test_languages_are_detected_by_script() -> None:
    assert detect_languages("hello there") == ["en"]
    assert detect_languages("我迟早弄死你") == ["zh"]
    assert detect_languages("我们一起去玩 games 吧") == ["zh", "en"]  # most letters first
    assert detect_languages("ты дурак") == ["ru"]
    assert detect_languages("こんにちは世界") == ["ja"]
    assert detect_languages("안녕하세요") == ["ko"]
    assert detect_languages("👍 123") == ["en"]
    assert primary_language("zh-Hans") == "zh"
    assert primary_language("EN_us") == "en"


def test_the_quota_refills_at_its_rate_and_keeps_keys_apart() -> None:
    now = [0.0]
    quota = KeyQuota(qps=2.0, burst=2.0, clock=lambda: now[0])
    quota.take("a")
    quota.take("a")
    with pytest.raises(PerspectiveError) as refused:
        quota.take("a")
    assert (refused.value.http_status, refused.value.canonical) == (429, "RESOURCE_EXHAUSTED")
    quota.take("b")  # another key has its own bucket
    now[0] = 0.5  # one token back
    quota.take("a")
    with pytest.raises(PerspectiveError):
        quota.take("a")


def test_a_quota_needs_a_rate_and_a_bucket() -> None:
    with pytest.raises(ValueError, match="qps"):
        KeyQuota(qps=0, burst=1)
