"""The `modstream review` commands: serve, add-user (role, --queues), disable-user."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from common.logs import configure_logging
from review.settings import ReviewServiceSettings

__all__ = ["parse_queues", "register"]


def _serve(args: argparse.Namespace) -> int:
    settings = ReviewServiceSettings()
    import uvicorn

    from review.api import create_app

    if args.host:
        # The bound host decides `cookie_secure = auto`, so the override must reach the settings.
        review = settings.review.model_copy(update={"host": args.host})
        settings = settings.model_copy(update={"review": review})
    configure_logging(settings.log_level)
    uvicorn.run(
        create_app(settings),
        host=settings.review.host,
        port=args.port or settings.review.port,
        log_level="warning",
        log_config=None,  # uvicorn's loggers go through common.logs (JSON), not its own handlers
        access_log=False,
        proxy_headers=False,
    )
    return 0


def parse_queues(raw: str | None) -> list[str] | None:
    """``--queues hate,spam`` as a category list; ``None`` (not given, or ``all``) means all."""
    if raw is None or raw.strip().lower() == "all":
        return None
    categories = sorted({part.strip() for part in raw.split(",") if part.strip()})
    if not categories:
        raise argparse.ArgumentTypeError("--queues needs at least one category (or 'all')")
    return categories


def parse_tenants(raw: str) -> list[str]:
    """``--tenants a,b`` as a list of valid tenant ids (at least one)."""
    from pipelines.tenants import TenantIdError, check_tenant_id

    tenants = sorted({part.strip() for part in raw.split(",") if part.strip()})
    if not tenants:
        raise argparse.ArgumentTypeError("--tenants needs at least one tenant id")
    try:
        return [check_tenant_id(tenant) for tenant in tenants]
    except TenantIdError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


async def _add_user(
    settings: ReviewServiceSettings,
    name: str,
    role: str,
    categories: list[str] | None,
    tenants: list[str] | None = None,
) -> str:
    import asyncpg

    from review.auth import create_user
    from review.schemas import Role

    conn = await asyncpg.connect(settings.postgres.dsn.get_secret_value())
    try:
        return await create_user(conn, name, Role(role), categories, tenants)
    finally:
        await conn.close()


def _run_add_user(args: argparse.Namespace) -> int:
    settings = ReviewServiceSettings()
    from review.errors import UserExistsError

    try:
        token = asyncio.run(_add_user(settings, args.name, args.role, args.queues, args.tenants))
    except UserExistsError as exc:
        print(f"error: {exc}")
        return 1
    works = "every category" if args.queues is None else ", ".join(args.queues)
    if args.tenants is not None:
        scope = "tenants " + ", ".join(args.tenants)
    else:
        scope = "every tenant" if args.role == "admin" else "the default tenant"
    print(
        f"created {args.role} {args.name} ({works}; {scope}); this token is shown once, "
        "store it now:"
    )
    print(token)
    return 0


async def _disable_user(settings: ReviewServiceSettings, name: str) -> bool:
    import asyncpg

    from review.auth import disable_user

    conn = await asyncpg.connect(settings.postgres.dsn.get_secret_value())
    try:
        return await disable_user(conn, name)
    finally:
        await conn.close()


def _run_disable_user(args: argparse.Namespace) -> int:
    settings = ReviewServiceSettings()
    if not asyncio.run(_disable_user(settings, args.name)):
        print(f"error: no enabled user {args.name!r}")
        return 1
    print(f"disabled {args.name}: its token and console sessions no longer work")
    return 0


def register(subparsers: Any) -> None:
    review = subparsers.add_parser("review", help="the moderators' review API and console")
    commands = review.add_subparsers(dest="review_command", required=True, metavar="COMMAND")
    serve = commands.add_parser("serve", help="serve the review API (/api) and console (/console)")
    serve.add_argument("--host", default=None, help="default: review.host")
    serve.add_argument("--port", type=int, default=None, help="default: review.port")
    serve.set_defaults(handler=_serve)
    add_user = commands.add_parser("add-user", help="create a user and print its API token once")
    add_user.add_argument("name")
    add_user.add_argument(
        "--role",
        choices=("moderator", "admin", "platform"),
        default="moderator",
        help="platform: a chat server's token for `modstream online` (no review access)",
    )
    add_user.add_argument(
        "--queues",
        type=parse_queues,
        default=None,
        metavar="CATEGORY,...",
        help="the categories this user works (default: all); items outside them stay hidden",
    )
    add_user.add_argument(
        "--tenants",
        type=parse_tenants,
        default=None,
        metavar="TENANT,...",
        help="the tenants this user acts for (default: every tenant for an admin, the default "
        "tenant for a moderator or a platform token); other tenants' items do not exist for it",
    )
    add_user.set_defaults(handler=_run_add_user)
    disable = commands.add_parser("disable-user", help="revoke a user's token and sessions")
    disable.add_argument("name")
    disable.set_defaults(handler=_run_disable_user)
