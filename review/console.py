"""The moderator console: server-rendered pages over the same queue repository as the API.

Signing in trades an API token for a session cookie (random id, HttpOnly, SameSite=Strict; the
database keeps only its SHA-256). Every form carries the session's CSRF token. Pages send a
Content-Security-Policy that allows only this app's own script and stylesheet. Sign-in attempts
are limited per client address; an item's page shows its message text only to the holder of its
claim (or an admin), with what the verdict's rules matched marked (``review.highlight``), and
says how to claim it otherwise.

An item of the ``appeals`` queue reads as the API's item view does (``ReviewQueue.context``, so
the statement is shown and audited the same way): the appealed message, the appellant's
statement, the decision under appeal and its trail. Its claim holder decides it upheld or
reversed with a reason through ``ReviewServices.decide_appeal``, the API's own path; every
refusal (the original decider's ``own_decision`` among them) is the API's typed error, shown on
the error page.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

import jinja2
from fastapi import FastAPI, Request, Response
from fastapi.responses import RedirectResponse
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from common.logs import get_logger
from pipelines.attribution import AttributionError
from pipelines.rule_hits import RuleHitError
from review.auth import (
    ConsoleSession,
    authenticate_session,
    authenticate_token,
    end_session,
    start_session,
)
from review.errors import InvalidDecisionError, InvalidFormError, ReviewError
from review.highlight import Piece, highlight
from review.ratelimit import client_address
from review.schemas import APPEALS_QUEUE, Action, AppealOutcome, QueueFilter

if TYPE_CHECKING:
    from review.api import ReviewServices

__all__ = ["COOKIE_NAME", "register_console", "render_error"]

COOKIE_NAME = "modstream_session"
_HERE = Path(__file__).parent
_templates = Jinja2Templates(
    env=jinja2.Environment(
        loader=jinja2.FileSystemLoader(_HERE / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
)
_log = get_logger(__name__)
_MAX_FORM_FIELDS = 20
_SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
_SHORTCUTS = {
    Action.APPROVE: "a",
    Action.REMOVE_MESSAGE: "r",
    Action.WARN: "w",
    Action.MUTE: "m",
    Action.BAN: "b",
    Action.ESCALATE_TO_ADMIN: "e",
}
_OUTCOME_LABELS = {
    AppealOutcome.UPHELD: "Uphold: the decision stands",
    AppealOutcome.REVERSED: "Reverse: withdraw the decision and lift its strikes",
}


def _message_pieces(
    text: str | None,
    rule_hits: list[dict[str, Any]],
    model_spans: dict[str, Any] | None = None,
) -> list[Piece]:
    """The item's text with what its rules matched and the words that moved the model marked
    (plain when a stored span is not an offset pair)."""
    if not text:
        return []
    try:
        return highlight(text, rule_hits, model_spans)
    except (RuleHitError, AttributionError):
        return [Piece(text)]


class _SignInRequiredError(ReviewError):
    """No live console session: send the browser to the sign-in page (its own handler)."""

    code = "sign_in_required"
    status_code = 401


def _page(request: Request, name: str, context: dict[str, Any], status_code: int = 200) -> Response:
    response = _templates.TemplateResponse(request, name, context, status_code=status_code)
    response.headers.update(_SECURITY_HEADERS)
    return response


def render_error(request: Request, exc: ReviewError) -> Response:
    session: ConsoleSession | None = getattr(request.state, "console_session", None)
    return _page(
        request,
        "error.html",
        {"session": session, "code": exc.code, "detail": str(exc)},
        status_code=exc.status_code,
    )


async def _session(request: Request) -> ConsoleSession:
    cookie = request.cookies.get(COOKIE_NAME, "")
    svc = request.app.state.review
    async with svc.pool.acquire() as conn:
        session = await authenticate_session(conn, cookie)
    if session is None:
        raise _SignInRequiredError("sign in first")
    request.state.console_session = session
    return session


async def _form(request: Request) -> dict[str, str]:
    """The URL-encoded form (the body is already bounded by the body-limit middleware)."""
    body = (await request.body()).decode("utf-8", errors="replace")
    try:
        fields = parse_qs(body, max_num_fields=_MAX_FORM_FIELDS)
    except ValueError as exc:
        raise InvalidFormError(f"a form may have at most {_MAX_FORM_FIELDS} fields") from exc
    return {key: values[0] for key, values in fields.items()}


async def _checked_form(request: Request, session: ConsoleSession) -> dict[str, str]:
    form = await _form(request)
    if not session.check_csrf(form.get("csrf", "")):
        raise InvalidDecisionError("the form expired; reload the page and try again")
    return form


def _redirect(url: str) -> Response:
    return RedirectResponse(url, status_code=303)


def _filter_from(params: Any) -> QueueFilter:
    return QueueFilter(
        category=params.get("category") or None,
        group_id=params.get("group_id") or None,
        queue=params.get("queue") or None,
    )


def register_console(app: FastAPI) -> None:
    app.mount("/console/static", StaticFiles(directory=_HERE / "static"), name="console_static")

    async def sign_in_required(request: Request, exc: Exception) -> Response:
        return _redirect("/console/login")

    app.add_exception_handler(_SignInRequiredError, sign_in_required)

    @app.get("/", include_in_schema=False)
    @app.get("/console", include_in_schema=False)
    async def home() -> Response:
        return _redirect("/console/queue")

    @app.get("/console/login", include_in_schema=False)
    async def login_page(request: Request) -> Response:
        return _page(request, "login.html", {"session": None, "failed": False})

    @app.post("/console/login", include_in_schema=False)
    async def login(request: Request) -> Response:
        svc = request.app.state.review
        svc.sign_in.count(client_address(request))
        form = await _form(request)
        async with svc.pool.acquire() as conn:
            user = await authenticate_token(conn, form.get("token", "").strip())
            if user is None:
                _log.info("console_sign_in_refused")
                return _page(
                    request, "login.html", {"session": None, "failed": True}, status_code=401
                )
            session_id = await start_session(conn, user, svc.settings.review.session_ttl_s)
        _log.info("console_signed_in", actor=user.name)
        response = _redirect("/console/queue")
        response.set_cookie(
            COOKIE_NAME,
            session_id,
            max_age=svc.settings.review.session_ttl_s,
            httponly=True,
            samesite="strict",
            secure=svc.settings.review.secure_cookies,
            path="/",
        )
        return response

    @app.post("/console/logout", include_in_schema=False)
    async def logout(request: Request) -> Response:
        session = await _session(request)
        await _checked_form(request, session)
        async with request.app.state.review.pool.acquire() as conn:
            await end_session(conn, request.cookies.get(COOKIE_NAME, ""))
        response = _redirect("/console/login")
        response.delete_cookie(
            COOKIE_NAME,
            path="/",
            httponly=True,
            samesite="strict",
            secure=request.app.state.review.settings.review.secure_cookies,
        )
        return response

    @app.get("/console/queue", include_in_schema=False)
    async def queue_page(request: Request) -> Response:
        session = await _session(request)
        svc = request.app.state.review
        flt = _filter_from(request.query_params)
        return _page(
            request,
            "queue.html",
            {
                "session": session,
                "items": await svc.queue.list_items(session.user, flt),
                "counts": await svc.queue.counts(session.user),
                "claims": await svc.queue.my_claims(session.user),
                "filter": flt,
            },
        )

    @app.post("/console/claim-next", include_in_schema=False)
    async def claim_next(request: Request) -> Response:
        session = await _session(request)
        form = await _checked_form(request, session)
        claim = await request.app.state.review.queue.claim_next(session.user, _filter_from(form))
        if claim is None:
            return _redirect("/console/queue?empty=1")
        return _redirect(f"/console/items/{claim.item_id}")

    @app.get("/console/items/{item_id}", include_in_schema=False)
    async def item_page(item_id: str, request: Request) -> Response:
        session = await _session(request)
        ctx = await request.app.state.review.queue.context(session.user, item_id)
        item = ctx.item
        held = item["status"] == "claimed" and item["claimed_by"] == session.user.name
        svc = request.app.state.review
        hits = ctx.verdict.rule_hits if ctx.verdict is not None else []
        words = ctx.verdict.model_spans if ctx.verdict is not None else None
        pieces = _message_pieces(item["message_text"], hits, words) if ctx.text_visible else []
        return _page(
            request,
            "item.html",
            {
                "session": session,
                "ctx": ctx,
                "item": item,
                "held": held,
                "pieces": pieces,
                "max_reason_chars": svc.settings.review.max_reason_chars,
                "actions": [(a.value, a.value.replace("_", " "), _SHORTCUTS[a]) for a in Action],
                "is_appeal": item["queue"] == APPEALS_QUEUE,
                "outcomes": [(o.value, _OUTCOME_LABELS[o]) for o in AppealOutcome],
            },
        )

    @app.post("/console/items/{item_id}/claim", include_in_schema=False)
    async def claim(item_id: str, request: Request) -> Response:
        session = await _session(request)
        await _checked_form(request, session)
        claimed = await request.app.state.review.queue.claim(session.user, item_id)
        return _redirect(f"/console/items/{claimed.item_id}")

    @app.post("/console/items/{item_id}/release", include_in_schema=False)
    async def release(item_id: str, request: Request) -> Response:
        session = await _session(request)
        await _checked_form(request, session)
        await request.app.state.review.queue.release(session.user, item_id)
        return _redirect("/console/queue")

    @app.post("/console/items/{item_id}/decide", include_in_schema=False)
    async def decide(item_id: str, request: Request) -> Response:
        session = await _session(request)
        form = await _checked_form(request, session)
        try:
            action = Action(form.get("action", ""))
        except ValueError as exc:
            raise InvalidDecisionError("choose one of the decision buttons") from exc
        svc = request.app.state.review
        result = await svc.queue.decide(session.user, item_id, action, form.get("reason", ""))
        _log.info(
            "review_decided", item_id=result.item_id, action=action.value, actor=session.user.name
        )
        await svc.publish_pending(result)
        return _redirect(f"/console/audit?item_id={result.item_id}")

    @app.post("/console/items/{item_id}/appeal-outcome", include_in_schema=False)
    async def decide_appeal(item_id: str, request: Request) -> Response:
        session = await _session(request)
        form = await _checked_form(request, session)
        try:
            outcome = AppealOutcome(form.get("outcome", ""))
        except ValueError as exc:
            raise InvalidDecisionError("choose Uphold or Reverse") from exc
        svc: ReviewServices = request.app.state.review
        result = await svc.decide_appeal(session.user, item_id, outcome, form.get("reason", ""))
        return _redirect(f"/console/audit?item_id={result.item_id}")

    @app.get("/console/audit", include_in_schema=False)
    async def audit_page(request: Request) -> Response:
        session = await _session(request)
        item_id = request.query_params.get("item_id", "").strip() or None
        actor = request.query_params.get("actor") or None
        events = await request.app.state.review.queue.events(
            session.user, item_id=item_id, actor=actor, limit=200
        )
        return _page(
            request,
            "audit.html",
            {"session": session, "events": events, "item_id": item_id, "actor": actor},
        )
