"""The analyzer over fakes of the moderator, key check and model, and the ASGI app driven
directly (no socket): stored and unstored calls, the response shape, keys, errors."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import grpc
import orjson
import pytest

from engine.inference import InferenceResult, InferenceUnavailable
from online.auth import Grant
from online.errors import Overloaded
from online.moderator import Answer, Latency
from online.perspective.analyze import Analyzer
from online.perspective.errors import PerspectiveError
from online.perspective.http import ANALYZE_PATH, AnalyzeApp, Request
from online.perspective.mapping import load_mapping
from online.perspective.quota import KeyQuota
from pipelines.messages import ChatMessage, SourcePosition
from pipelines.policy import PolicyThresholds
from pipelines.scores import ModelScores
from pipelines.tenants import DEFAULT_TENANT
from pipelines.verdict_factory import NO_MODEL, MessageFacts, ModelRun, make_verdict
from tests.unit.online.online_fakes import RULES

TOKEN = "platform-token"
SECRET = "you are a muppet"
HARMFUL = ModelScores((0.8, 0.1, 0.1), (1.0, 0.0, 0.0, 0.0), (0.2, 0.7, 0.1), (0.9, 0.0, 0, 0, 0))
CALM = ModelScores((0.1, 0.8, 0.1), (1.0, 0.0, 0.0, 0.0), (0.97, 0.02, 0.01), (0.01,) * 5)
ATTRIBUTES = ("TOXICITY", "INSULT", "THREAT")


class FakeModel:
    def __init__(self, scores: ModelScores = HARMFUL) -> None:
        self.scores = scores
        self.texts: list[str] = []
        self.down = False

    async def infer(self, texts: Sequence[str]) -> InferenceResult:
        self.texts.extend(texts)
        if self.down:
            raise InferenceUnavailable("down")
        return InferenceResult([self.scores] * len(texts), "moderation", "2", 1.0)


class FakeModerator:
    """Decides each message with the real rules and policy, scoring with ``scores`` (``None``:
    the rules alone, as a rule block is); records what it was asked to check."""

    def __init__(self, scores: ModelScores | None = HARMFUL) -> None:
        self.scores = scores
        self.checked: list[ChatMessage] = []
        self.full = False

    @contextmanager
    def admit(self, count: int = 1) -> Iterator[None]:
        if self.full:
            raise Overloaded("queue full (1 messages in flight)")
        yield

    def deadline_for(self, time_remaining_s: float | None) -> float:
        return 0.0

    async def check(self, message: ChatMessage, deadline: float) -> Answer:
        self.checked.append(message)
        outcome, _ = RULES.evaluate(message)
        position = SourcePosition("online", 0, len(self.checked))
        run = NO_MODEL if self.scores is None else ModelRun("moderation", "2", "b", 1.0)
        verdict = make_verdict(
            MessageFacts.of(position, message),
            outcome,
            self.scores,
            PolicyThresholds(),
            run,
            queue_ms=0.0,
        )
        return Answer(verdict, replayed=False, latency=Latency())


class FakeKeys:
    def __init__(self, tenants: frozenset[str] = frozenset({DEFAULT_TENANT})) -> None:
        self.down = False
        self.tenants = tenants
        self.denied: list[str] = []

    async def refusal(self, metadata: Any, method: str) -> tuple[grpc.StatusCode, str] | None:
        if self.down:
            return grpc.StatusCode.UNAVAILABLE, "cannot check the token now"
        if dict(metadata).get("authorization") == f"Bearer {TOKEN}":
            return None
        return grpc.StatusCode.UNAUTHENTICATED, "token refused"

    async def grant_of(self, metadata: Any, method: str) -> Grant | None:
        return Grant("platform-1", self.tenants)

    async def deny(self, grant: Grant, method: str, tenant: str) -> None:
        self.denied.append(tenant)


def _analyzer(
    moderator: FakeModerator | None = None, model: FakeModel | None = None, **quota: float
) -> tuple[Analyzer, FakeModerator, FakeModel, FakeKeys]:
    moderator = moderator or FakeModerator()
    model = model or FakeModel()
    keys = FakeKeys()
    analyzer = Analyzer(
        moderator=moderator,
        rules=RULES,
        model=model,
        keys=keys,
        quota=KeyQuota(qps=quota.get("qps", 100.0), burst=quota.get("burst", 100.0)),
        mapping=load_mapping(),
        model_timeout_s=1.0,
    )
    return analyzer, moderator, model, keys


def _body(text: str = SECRET, *attributes: str, **fields: Any) -> bytes:
    return orjson.dumps(
        {
            "comment": {"text": text},
            "requestedAttributes": {a: {} for a in attributes or ATTRIBUTES},
            **fields,
        }
    )


async def test_a_stored_call_is_checked_as_a_message_and_answers_perspectives_shape() -> None:
    analyzer, moderator, model, _ = _analyzer()
    answer = await analyzer.analyze(
        TOKEN, _body(clientToken="c-1", communityId="forum-7", sessionId="s-9")
    )
    (message,) = moderator.checked
    assert message.text == SECRET
    assert (message.group_id, message.sender_id) == ("forum-7", "s-9")
    assert message.message_id.startswith("perspective-")
    assert model.texts == []  # the verdict's own scores were used
    scores = answer["attributeScores"]
    assert isinstance(scores, dict)
    assert scores["TOXICITY"]["summaryScore"] == {
        "value": pytest.approx(0.8),
        "type": "PROBABILITY",
    }
    assert scores["INSULT"]["summaryScore"]["value"] == pytest.approx(0.9)
    assert scores["THREAT"]["spanScores"] == [
        {"begin": 0, "end": len(SECRET), "score": {"value": 0.0, "type": "PROBABILITY"}}
    ]
    assert answer["languages"] == ["en"]
    assert answer["detectedLanguages"] == ["en"]
    assert answer["clientToken"] == "c-1"


async def test_do_not_store_never_reaches_the_moderator_and_scores_the_canonical_text() -> None:
    analyzer, moderator, model, _ = _analyzer()
    answer = await analyzer.analyze(TOKEN, _body("Y0U are a MUPPET", doNotStore=True))
    assert moderator.checked == []
    assert model.texts == [RULES.evaluate(_message("Y0U are a MUPPET"))[1]]
    assert "TOXICITY" in answer["attributeScores"]  # type: ignore[operator]


def _message(text: str) -> ChatMessage:
    return ChatMessage("m", "g", "s", text, datetime.now(UTC), {})


async def test_a_verdict_without_model_scores_asks_the_model_and_keeps_the_rule_spans() -> None:
    """A rule-blocked verdict has no model scores: the model is asked for them, and the
    rule's spans locate the attribute."""
    analyzer, _, model, _ = _analyzer(FakeModerator(scores=None), FakeModel(CALM))
    text = "I will kill you if I see you again"
    answer = await analyzer.analyze(TOKEN, _body(text, "THREAT", spanAnnotations=True))
    assert len(model.texts) == 1
    threat = answer["attributeScores"]["THREAT"]  # type: ignore[index]
    assert threat["summaryScore"]["value"] >= 0.9
    assert all(s["end"] - s["begin"] < len(text) for s in threat["spanScores"])


async def test_with_the_model_down_only_rule_evidence_is_answered() -> None:
    model = FakeModel()
    model.down = True
    analyzer, *_ = _analyzer(FakeModerator(scores=None), model)
    with pytest.raises(PerspectiveError) as refused:
        await analyzer.analyze(TOKEN, _body("good morning", "TOXICITY"))
    assert (refused.value.http_status, refused.value.canonical) == (503, "UNAVAILABLE")
    threat = await analyzer.analyze(TOKEN, _body("I will kill you if I see you again", "THREAT"))
    assert threat["attributeScores"]["THREAT"]["summaryScore"]["value"] >= 0.9  # type: ignore[index]


async def test_a_threshold_leaves_low_attributes_out() -> None:
    analyzer, *_ = _analyzer()
    body = orjson.dumps(
        {
            "comment": {"text": SECRET},
            "requestedAttributes": {
                "INSULT": {"scoreThreshold": 0.5},
                "THREAT": {"scoreThreshold": 0.5},
            },
        }
    )
    answer = await analyzer.analyze(TOKEN, body)
    assert set(answer["attributeScores"]) == {"INSULT"}  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("key", "body", "status", "code", "error_type"),
    [
        (None, _body(), 403, "PERMISSION_DENIED", "API_KEY_MISSING"),
        ("wrong", _body(), 401, "UNAUTHENTICATED", "API_KEY_INVALID"),
        (
            TOKEN,
            _body(languages=["fr"]),
            400,
            "INVALID_ARGUMENT",
            "LANGUAGE_NOT_SUPPORTED_BY_ATTRIBUTE",
        ),
        (TOKEN, _body("ты дурак"), 400, "INVALID_ARGUMENT", "LANGUAGE_NOT_SUPPORTED_BY_ATTRIBUTE"),
        (TOKEN, _body(SECRET, "FLIRTATION"), 400, "INVALID_ARGUMENT", "ATTRIBUTE_NOT_SUPPORTED"),
        (TOKEN, _body("x" * 10_001), 400, "INVALID_ARGUMENT", "COMMENT_TOO_LONG"),
    ],
)
async def test_refusals(
    key: str | None, body: bytes, status: int, code: str, error_type: str
) -> None:
    analyzer, moderator, *_ = _analyzer()
    with pytest.raises(PerspectiveError) as refused:
        await analyzer.analyze(key, body)
    error = refused.value
    assert (error.http_status, error.canonical, error.error_type) == (status, code, error_type)
    assert SECRET not in error.message
    assert moderator.checked == []


async def test_keys_that_cannot_be_checked_are_503_and_a_full_queue_429() -> None:
    analyzer, moderator, _, keys = _analyzer()
    keys.down = True
    with pytest.raises(PerspectiveError) as down:
        await analyzer.analyze(TOKEN, _body())
    assert down.value.http_status == 503
    keys.down = False
    moderator.full = True
    for unstored in (False, True):
        with pytest.raises(PerspectiveError) as full:
            await analyzer.analyze(TOKEN, _body(doNotStore=unstored))
        assert (full.value.http_status, full.value.canonical) == (429, "RESOURCE_EXHAUSTED")


async def test_the_quota_is_per_key_and_answers_429() -> None:
    analyzer, *_ = _analyzer(qps=0.001, burst=1)
    await analyzer.analyze(TOKEN, _body())
    with pytest.raises(PerspectiveError) as refused:
        await analyzer.analyze(TOKEN, _body())
    assert refused.value.body()["error"]["status"] == "RESOURCE_EXHAUSTED"  # type: ignore[index]


async def _call(
    app: AnalyzeApp,
    method: str,
    target: str,
    body: bytes,
    headers: Mapping[str, str] | None = None,
) -> tuple[int, dict[str, Any]]:
    answer = await app.answer(Request(method, target, headers or {}, body))
    return answer.status, orjson.loads(answer.body)


async def test_the_app_reads_the_key_from_the_query_or_googles_header() -> None:
    seen: list[tuple[str | None, bytes]] = []

    async def analyze(key: str | None, body: bytes) -> dict[str, object]:
        seen.append((key, body))
        return {"attributeScores": {}}

    app = AnalyzeApp(analyze, max_body_bytes=1024)
    assert await _call(app, "POST", f"{ANALYZE_PATH}?key=k1", b'{"a": 1}') == (
        200,
        {"attributeScores": {}},
    )
    await _call(app, "POST", ANALYZE_PATH, b"{}", {"x-goog-api-key": "k2"})
    assert seen == [("k1", b'{"a": 1}'), ("k2", b"{}")]


async def test_the_app_answers_errors_in_googles_shape() -> None:
    async def analyze(key: str | None, body: bytes) -> dict[str, object]:
        if body == b"boom":
            raise RuntimeError(SECRET)
        raise PerspectiveError.invalid("nope", "COMMENT_EMPTY")

    recorded: list[str] = []
    app = AnalyzeApp(analyze, max_body_bytes=1024, record=lambda code, _: recorded.append(code))
    status, body = await _call(app, "POST", ANALYZE_PATH, b"{}")
    assert (status, body["error"]["status"]) == (400, "INVALID_ARGUMENT")
    assert body["error"]["details"][0]["errorType"] == "COMMENT_EMPTY"
    status, body = await _call(app, "POST", ANALYZE_PATH, b"boom")
    assert (status, body["error"]["status"]) == (500, "INTERNAL")
    assert SECRET not in orjson.dumps(body).decode()
    assert (await _call(app, "GET", ANALYZE_PATH, b""))[0] == 405
    assert (await _call(app, "POST", "/v1/other", b"{}"))[0] == 404
    assert (await _call(app, "POST", ANALYZE_PATH, b"x" * 2000))[0] == 413
    assert recorded == [
        "INVALID_ARGUMENT",
        "INTERNAL",
        "INVALID_ARGUMENT",
        "NOT_FOUND",
        "INVALID_ARGUMENT",
    ]


@pytest.mark.parametrize("do_not_store", [False, True])
async def test_a_key_bound_to_one_tenant_decides_every_call_with_it(do_not_store: bool) -> None:
    """Whatever the community, a key bound to one tenant speaks for that tenant; the community
    stays the message's group."""
    analyzer, moderator, model, keys = _analyzer()
    keys.tenants = frozenset({"arcade"})
    await analyzer.analyze(TOKEN, _body(communityId="forum-7", doNotStore=do_not_store))
    if do_not_store:
        assert moderator.checked == []
        assert model.texts
    else:
        (message,) = moderator.checked
        assert (message.tenant, message.group_id) == ("arcade", "forum-7")


async def test_a_key_of_several_tenants_speaks_for_the_community_it_names() -> None:
    analyzer, moderator, _, keys = _analyzer()
    keys.tenants = frozenset({"arcade", "market"})
    await analyzer.analyze(TOKEN, _body(communityId="market"))
    assert [m.tenant for m in moderator.checked] == ["market"]


@pytest.mark.parametrize(("community", "recorded"), [("bazaar", ["bazaar"]), (None, [])])
async def test_a_community_the_key_may_not_speak_for_is_refused_and_recorded(
    community: str | None, recorded: list[str]
) -> None:
    """403 PERMISSION_DENIED, nothing checked; a named tenant id is recorded as a denial."""
    analyzer, moderator, model, keys = _analyzer()
    keys.tenants = frozenset({"arcade", "market"})
    fields = {} if community is None else {"communityId": community}
    with pytest.raises(PerspectiveError) as info:
        await analyzer.analyze(TOKEN, _body(**fields))
    assert (info.value.http_status, info.value.canonical) == (403, "PERMISSION_DENIED")
    assert moderator.checked == []
    assert model.texts == []
    assert keys.denied == recorded
