"""One ``comments:analyze`` call: key, request, languages, quota, verdict, attribute scores.

A stored call (``doNotStore`` absent or false) is a verdict like any other: its comment becomes a
``ChatMessage`` (``communityId`` its group, ``sessionId`` its sender, the key's tenant its tenant:
``online.perspective.tenancy``) checked by the online
service's :class:`~online.moderator.OnlineModerator`, the path ``CheckMessage`` takes (the same
rules, model lane and policy; stored, escalated, published). A ``doNotStore`` call stores nothing
and publishes nothing: the rule stage and the model score it directly, outside the collector
(no verdict is made, so nothing reaches the processor's writer). When a verdict carries no model
scores (rules blocked it before the model, or the model's budget ran out) the model is asked for
them on the same canonical text; when it cannot answer, the attributes the rule hits score are
answered and the others are refused with 503 ``UNAVAILABLE``, never given a made-up number.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import grpc

from common.logs import get_logger
from engine.inference import InferenceError, InferenceResult
from online.auth import Grant
from online.errors import InvalidMessage, OnlineError, Overloaded, StoreDown
from online.moderator import Answer
from online.perspective.errors import PerspectiveError
from online.perspective.languages import detect_languages, primary_language
from online.perspective.mapping import AttributeMapping, AttributeScore, Unscorable
from online.perspective.quota import KeyQuota
from online.perspective.request import AnalyzeRequest, parse_request
from online.perspective.response import analyze_response
from online.perspective.tenancy import NoTenant, tenant_of_call
from pipelines.canonical import canonicalize
from pipelines.decode import DecodeError, DecodeErrorCode, message_from_fields
from pipelines.messages import ChatMessage
from pipelines.rule_hits import HitSpan, RuleHit, RuleOutcome
from pipelines.scores import ModelScores
from pipelines.tenants import TENANT_ID

__all__ = ["Analyzer", "Keys", "Model", "Moderator", "Rules"]

_log = get_logger(__name__)
METHOD = "/google.commentanalyzer.v1alpha1.CommentAnalyzer/AnalyzeComment"
"""How analyze calls are named to the token check (its refusal log names the method)."""


class Moderator(Protocol):
    """The online moderator, as an analyze call uses it (``online.moderator``)."""

    def admit(self, count: int = 1) -> AbstractContextManager[None]: ...

    def deadline_for(self, time_remaining_s: float | None) -> float: ...

    async def check(self, message: ChatMessage, deadline: float) -> Answer: ...


class Rules(Protocol):
    def evaluate(self, message: ChatMessage) -> tuple[RuleOutcome, str]: ...


class Model(Protocol):
    async def infer(self, texts: Sequence[str]) -> InferenceResult: ...


class Keys(Protocol):
    """The online service's token check (``online.auth.TokenCheck``)."""

    async def refusal(self, metadata: Any, method: str) -> tuple[grpc.StatusCode, str] | None: ...

    async def grant_of(self, metadata: Any, method: str) -> Grant | None: ...

    async def deny(self, grant: Grant, method: str, tenant: str) -> None: ...


@dataclass(frozen=True, slots=True)
class _Scored:
    hits: tuple[RuleHit, ...]
    scores: ModelScores | None
    attribution: tuple[tuple[str, HitSpan], ...]


_MISSING_KEY = PerspectiveError(
    403, "PERMISSION_DENIED", "The request is missing a valid API key.", "API_KEY_MISSING"
)
_BAD_KEY = PerspectiveError(
    401, "UNAUTHENTICATED", "API key not valid. Please pass a valid API key.", "API_KEY_INVALID"
)
_KEYS_DOWN = PerspectiveError(503, "UNAVAILABLE", "The API key cannot be checked now.")
_NO_TENANT = PerspectiveError(
    403,
    "PERMISSION_DENIED",
    "This API key speaks for several communities: communityId must name one of them.",
)


def _from_online(error: OnlineError) -> PerspectiveError:
    """The Perspective error for an online service error (its detail names codes, not text)."""
    if isinstance(error, PerspectiveError):
        return error
    if isinstance(error, InvalidMessage):
        if error.code == DecodeErrorCode.TEXT_TOO_LONG.value:
            return PerspectiveError.invalid(error.detail, "COMMENT_TOO_LONG")
        return PerspectiveError.invalid(error.detail)
    if isinstance(error, Overloaded):
        return PerspectiveError(429, "RESOURCE_EXHAUSTED", error.detail)
    if isinstance(error, StoreDown):
        return PerspectiveError(503, "UNAVAILABLE", error.detail)
    return PerspectiveError(500, "INTERNAL", error.detail)


def _attribution(answer: Answer) -> Iterator[tuple[str, HitSpan]]:
    spans = answer.verdict.model_spans
    if spans is not None:
        for span in spans.spans:
            yield spans.output, (span.start, span.end)


class Analyzer:
    """Answers analyze calls over the online service's parts (see the module docstring)."""

    def __init__(
        self,
        *,
        moderator: Moderator,
        rules: Rules,
        model: Model,
        keys: Keys | None,
        quota: KeyQuota,
        mapping: AttributeMapping,
        model_timeout_s: float,
    ) -> None:
        self._moderator = moderator
        self._rules = rules
        self._model = model
        self._keys = keys
        self._quota = quota
        self._mapping = mapping
        self._model_timeout_s = model_timeout_s

    async def analyze(self, key: str | None, body: bytes) -> dict[str, object]:
        """The response body of one call; ``PerspectiveError`` when it is refused or fails."""
        grant = await self._check_key(key)
        request = parse_request(body)
        languages, detected = self._languages(request)
        self._quota.take(key or "")
        message = self._message(request, await self._tenant(grant, request))
        scored = await (
            self._score_unstored(message) if request.do_not_store else self._score_stored(message)
        )
        scores: dict[str, AttributeScore] = {}
        unscorable: list[str] = []
        for attribute in request.attributes:
            try:
                scores[attribute.name] = self._mapping.score(
                    attribute.name, scored.scores, scored.hits, scored.attribution
                )
            except Unscorable:
                unscorable.append(attribute.name)
        if unscorable:
            if scored.scores is None:
                raise PerspectiveError(
                    503, "UNAVAILABLE", f"The model cannot score {', '.join(unscorable)} now."
                )
            raise PerspectiveError.invalid(
                f"Attribute {unscorable[0]} cannot be scored by the served model.",
                "ATTRIBUTE_NOT_SUPPORTED",
            )
        return analyze_response(request, languages, detected, scores)

    async def _check_key(self, key: str | None) -> Grant | None:
        """What the key may do (``None`` with tokens off); refused keys raise."""
        if self._keys is None:
            return None
        if not key:
            raise _MISSING_KEY
        metadata = (("authorization", f"Bearer {key}"),)
        refusal = await self._keys.refusal(metadata, METHOD)
        if refusal is None:
            grant = await self._keys.grant_of(metadata, METHOD)
            if grant is not None:
                return grant
            raise _KEYS_DOWN
        raise _KEYS_DOWN if refusal[0] is grpc.StatusCode.UNAVAILABLE else _BAD_KEY

    async def _tenant(self, grant: Grant | None, request: AnalyzeRequest) -> str:
        """The call's tenant (``online.perspective.tenancy``); a community the key may not
        speak for is refused, and recorded when it names a tenant id."""
        try:
            return tenant_of_call(grant, request.community_id)
        except NoTenant:
            community = request.community_id or ""
            if grant is not None and self._keys is not None and TENANT_ID.fullmatch(community):
                await self._keys.deny(grant, METHOD, community)
            raise _NO_TENANT from None

    def _languages(self, request: AnalyzeRequest) -> tuple[list[str], list[str]]:
        """The request's languages (as sent, else the detected primary one) and the detected
        ones; 400 ``LANGUAGE_NOT_SUPPORTED_BY_ATTRIBUTE`` when an attribute or a language is
        not one modstream scores."""
        detected = detect_languages(request.text)
        languages = list(request.languages) or detected[:1]
        attributes = self._mapping.attributes
        for attribute in request.attributes:
            rule = attributes.get(attribute.name)
            if rule is None:
                raise PerspectiveError.invalid(
                    f"Unknown attribute: {attribute.name}. modstream scores "
                    f"{', '.join(sorted(attributes))}.",
                    "ATTRIBUTE_NOT_SUPPORTED",
                )
            unsupported = [
                code for code in languages if primary_language(code) not in rule.languages
            ]
            if unsupported:
                raise PerspectiveError.invalid(
                    f"Attribute {attribute.name} does not support request languages: "
                    f"{', '.join(unsupported)}",
                    "LANGUAGE_NOT_SUPPORTED_BY_ATTRIBUTE",
                )
        return languages, detected

    def _message(self, request: AnalyzeRequest, tenant: str) -> ChatMessage:
        fields: dict[str, object] = {
            "tenant": tenant,
            "message_id": f"perspective-{uuid.uuid4().hex}",
            "group_id": request.community_id or "perspective",
            "sender_id": request.session_id or "perspective",
            "text": request.text,
            "sent_at": datetime.now(UTC),
            "metadata": {"source": "perspective"},
        }
        try:
            return message_from_fields(fields)
        except DecodeError as exc:
            raise _from_online(InvalidMessage(exc.code.value, exc.reason)) from exc

    async def _score_stored(self, message: ChatMessage) -> _Scored:
        """The verdict ``CheckMessage`` would give (stored, escalated, published)."""
        try:
            deadline = self._moderator.deadline_for(None)
            with self._moderator.admit():
                answer = await self._moderator.check(message, deadline)
        except OnlineError as exc:
            raise _from_online(exc) from exc
        verdict = answer.verdict
        scores = verdict.scores
        if scores is None:
            scores = await self._infer(canonicalize(message.text).text)
        return _Scored(verdict.rule_hits, scores, tuple(_attribution(answer)))

    async def _score_unstored(self, message: ChatMessage) -> _Scored:
        """Rules and model, nothing stored, published or logged about the comment; it holds a
        place in the service's bounded queue like any check (full: 429)."""
        try:
            with self._moderator.admit():
                outcome, model_text = self._rules.evaluate(message)
                return _Scored(outcome.hits, await self._infer(model_text), ())
        except OnlineError as exc:
            raise _from_online(exc) from exc

    async def _infer(self, model_text: str) -> ModelScores | None:
        """The model's scores of one canonical text, or ``None`` when it cannot answer in time."""
        try:
            async with asyncio.timeout(self._model_timeout_s):
                result = await self._model.infer([model_text])
        except (InferenceError, TimeoutError) as exc:
            _log.warning("perspective_model_unavailable", error=type(exc).__name__)
            return None
        return result.scores[0]
