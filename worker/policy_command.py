"""``modstream policy calibrate``, ``policy apply`` and ``policy check``: thresholds learnt from
the moderators' decisions, proposed, then made live by an admin.

``calibrate`` reads the review items moderators resolved in the window (``--since 30d``, up to
now) with the scores of the verdicts they reviewed, through the analysts' views (an analyst
login is enough: ``MODSTREAM_POSTGRES__DSN``), only verdicts of ``--model NAME[:VERSION]`` (by
default the configured ``triton.model_name``, any version; a rescan's scores recorded beside a
decided verdict count for the rescan's model). For each category with a model threshold it
proposes the lowest flag threshold whose precision against the moderators reaches
``--target-precision``, with its sample size and confidence intervals
(``pipelines.calibration``), and refuses a category with fewer than ``--min-decisions``
decisions. It prints the report, saves it as JSON (``--report``, beside ``--out`` by default)
and, when a category got a threshold, writes the proposal ``--out`` (default
``policy.proposal.toml``; never the live policy file, which it refuses): the keys of the live
file, with the proposed thresholds in place of theirs. A refused category keeps its current
value. No service reads a proposal. Exit 0 when the proposal was written, 1 when every category
was refused, 2 for arguments or a policy that cannot be used.

``apply PROPOSAL`` (an admin; ``worker.policy_apply``) validates the proposal, records who
applied it and when, and writes it as the live policy file (``policy_file.path``, or ``--to``),
which the running services reload. The admin's API token is read from standard input (a prompt
on a terminal), never from an argument. Exit 0 applied, 2 the proposal or arguments refused, 3
the token is not an enabled admin's, 4 PostgreSQL failed; in every case but 0 nothing changed.

``calibrate --tenant T`` calibrates tenant ``T``'s policy alone: only the decisions on ``T``'s
verdicts are read (``engine.stores.moderator_decisions``; a database whose verdicts carry no
tenant refuses, exit 2), the live file is ``T``'s in ``policy_file.tenants_dir`` (or, while
``T`` has none, the default tenant's, which ``T`` decides with now), and the proposal goes to
``<tenants_dir>/T.proposed.toml`` by default (``--out``), never to ``T.toml``. A proposal keeps
the live file's ``[levels]``; the calibrated flag thresholds, under ``[thresholds]``, win over
them.

``check FILE`` loads a policy file (the default tenant's or a tenant's) as the services would
(over the configured ``policy``) and prints, per category, its level and the flag and block
thresholds that level gives (``*`` marks a threshold the file sets itself), then the escalation
band; or why it is refused (exit 2).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import getpass
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from common.logs import configure_logging
from engine.stores.database import Database, StoreError
from engine.stores.moderator_decisions import ModeratorDecisionStore
from engine.stores.policy_applications import NotAnAdmin, PolicyApplicationStore
from pipelines.calibration import CALIBRATED_FIELDS, Proposal, by_category, propose
from pipelines.policy import OFF_THRESHOLD, PolicyConfigError, PolicyThresholds
from pipelines.policy_file import (
    PolicyDocument,
    PolicyFileError,
    category_lines,
    parse_policy,
    read_policy,
    read_policy_file,
    render_policy,
    resolve_policy,
)
from pipelines.policy_levels import SHIPPED_LEVELS
from pipelines.tenant_policies import proposal_path
from pipelines.tenants import TenantIdError, check_tenant_id
from worker.cli_args import ArgumentError, parse_model_ref, parse_moment
from worker.policy_apply import apply_proposal, read_proposal, write_atomically
from worker.settings import WorkerSettings

__all__ = ["apply", "calibrate", "register"]

_EXIT_REFUSED = 1
_EXIT_UNUSABLE = 2
_EXIT_NOT_ADMIN = 3
_EXIT_STORE = 4
_DEFAULT_OUT = "policy.proposal.toml"


def _live_document(live: Path | None) -> PolicyDocument:
    """What the live policy file says (its levels and keys are kept in a proposal unless
    calibrated); nothing if there is no live file."""
    if live is None or not live.exists():
        return PolicyDocument()
    try:
        return read_policy(live.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyFileError(f"cannot read {live}: {type(exc).__name__}") from exc


def _tenant_file(settings: WorkerSettings, tenant: str) -> Path:
    """``tenant``'s live policy file in ``policy_file.tenants_dir`` (which must be set)."""
    folder = settings.policy_file.tenants_dir
    if folder is None:
        raise ArgumentError(
            "--tenant needs the tenant policy folder: set MODSTREAM_POLICY_FILE__TENANTS_DIR "
            "(as the services do)"
        )
    return folder / f"{tenant}.toml"


def _live_file(settings: WorkerSettings, tenant: str | None) -> Path | None:
    """The file whose thresholds ``tenant`` (``None``: the default tenant) decides with now:
    its own in the tenant folder, else the default tenant's ``policy_file.path``."""
    if tenant is not None:
        own = _tenant_file(settings, tenant)
        if own.exists():
            return own
    return settings.policy_file.path


def _not_live(out: Path, live: Path | None) -> None:
    """Refuse to write a proposal over the live policy file (it goes live through ``apply``)."""
    if live is not None and out.resolve() == live.resolve():
        raise ArgumentError(
            f"--out {out} is the live policy file: write a proposal elsewhere, then apply it "
            "with modstream policy apply"
        )


def _within_policy(proposal: Proposal, current: PolicyThresholds) -> Proposal:
    """Refuse a proposal the policy cannot take (a flag threshold above its block one)."""
    if proposal.threshold is None:
        return proposal
    try:
        dataclasses.replace(current, **{proposal.field: proposal.threshold})
    except PolicyConfigError as exc:
        return dataclasses.replace(proposal, threshold=None, refused=str(exc))
    return proposal


async def calibrate(
    settings: WorkerSettings,
    *,
    since: datetime,
    until: datetime,
    target_precision: float,
    min_decisions: int,
    confidence: float,
    model: tuple[str, str],
    out: Path,
    resamples: int = 1000,
    tenant: str | None = None,
) -> dict[str, Any]:
    """Calibrate (``tenant``'s decisions only, when one is given), write the proposal ``out``
    when a category got a threshold; the report."""
    _not_live(out, settings.policy_file.path)
    if tenant is not None:
        _not_live(out, _tenant_file(settings, tenant))
    live = _live_file(settings, tenant)
    existing = _live_document(live)
    current = resolve_policy(existing, settings.policy)
    # What the written file will give before its calibrated keys: the levels and keys it
    # already has, over the configured thresholds (a proposal must fit with those, e.g. stay
    # below a block).
    written_base = current
    name, version = model
    async with Database(settings.postgres) as database:
        decisions = await ModeratorDecisionStore(database).decisions(
            since, until, name, version or None, tenant=tenant
        )
    grouped = by_category([(d.category, d.scores, d.harmful) for d in decisions])
    proposals = [
        _within_policy(
            propose(
                category,
                grouped[category],
                target_precision=target_precision,
                min_decisions=min_decisions,
                confidence=confidence,
                resamples=resamples,
            ),
            written_base,
        )
        for category in CALIBRATED_FIELDS
    ]
    accepted = {p.field: p.threshold for p in proposals if p.threshold is not None}
    values = {**existing.values, **accepted}
    whose = f"tenant {tenant}" if tenant is not None else "the default tenant"
    comments = [
        f"proposed for {whose} by modstream policy calibrate at {until.isoformat()}; "
        "an admin makes it live with: modstream policy apply FILE",
        f"from {len(decisions)} moderator decisions resolved since {since.isoformat()} "
        f"on verdicts of {name}{':' + version if version else ' (any version)'}, "
        f"target precision {target_precision:g}, confidence {confidence:g}",
        "per category: " + ", ".join(_summary(p) for p in proposals),
    ]
    text = render_policy(values, comments=comments, levels=existing.levels)
    thresholds = parse_policy(text, settings.policy)  # what the services will load
    written = bool(accepted)
    if written:
        write_atomically(out, text)
    return {
        "generated_at": until.isoformat(),
        "tenant": tenant,
        "since": since.isoformat(),
        "until": until.isoformat(),
        "model_name": name,
        "model_version": version or None,
        "target_precision": target_precision,
        "confidence": confidence,
        "min_decisions": min_decisions,
        "decisions": len(decisions),
        "current": dataclasses.asdict(current),
        "proposals": [p.as_dict() for p in proposals],
        "thresholds": dataclasses.asdict(thresholds) if written else None,
        "proposal": str(out) if written else None,
    }


def _summary(proposal: Proposal) -> str:
    if proposal.threshold is None:
        return f"{proposal.category} refused ({proposal.decisions} decisions)"
    return (
        f"{proposal.category} {proposal.threshold:.4f} "
        f"[{proposal.threshold_low:.4f}, {proposal.threshold_high:.4f}] "
        f"from {proposal.decisions} decisions"
    )


def _fmt(value: object, digits: int = 3) -> str:
    return f"{value:.{digits}f}" if isinstance(value, float) else "-"


def report_lines(report: dict[str, Any]) -> list[str]:
    """The report as the terminal shows it."""
    model = report["model_name"] + (
        f":{report['model_version']}" if report["model_version"] else " (any version)"
    )
    lines = [
        f"{report['decisions']} moderator decisions resolved since {report['since']} on "
        f"verdicts of {model}; target precision {report['target_precision']:g}, "
        f"{report['confidence']:.0%} intervals",
        f"{'category':<14}{'decisions':>10}{'harmful':>9}{'current':>9}{'proposed':>10}  "
        f"{'interval':<18}{'precision':<22}{'recall':>6}",
    ]
    for p in report["proposals"]:
        current = report["current"][p["field"]]
        head = f"{p['category']:<14}{p['decisions']:>10}{p['harmful']:>9}{current:>9.3f}"
        if p["threshold"] is None:
            lines.append(f"{head}{'-':>10}  refused: {p['refused']}")
            continue
        low, high = p["threshold_interval"]
        p_low, p_high = p["precision_interval"]
        interval = f"[{_fmt(low)}, {_fmt(high)}]"
        precision = f"{_fmt(p['precision'])} [{_fmt(p_low)}, {_fmt(p_high)}]"
        lines.append(
            f"{head}{p['threshold']:>10.4f}  {interval:<18}{precision:<22}{p['recall']:>6.3f}"
        )
    return lines


def _run_calibrate(args: argparse.Namespace) -> int:
    settings = WorkerSettings()
    configure_logging(settings.log_level)
    now = datetime.now(UTC)
    try:
        tenant = check_tenant_id(args.tenant) if args.tenant is not None else None
        if args.out is not None:
            out = Path(args.out)
        elif tenant is not None:
            out = proposal_path(_tenant_file(settings, tenant).parent, tenant)
        else:
            out = Path(_DEFAULT_OUT)
    except (ArgumentError, TenantIdError) as exc:
        print(f"modstream policy calibrate: {exc}", file=sys.stderr)
        return _EXIT_UNUSABLE
    report_path = Path(args.report) if args.report else out.with_suffix(".report.json")
    try:
        since = parse_moment(args.since, now)
        model = parse_model_ref(args.model or settings.triton.model_name)
        report = asyncio.run(
            calibrate(
                settings,
                since=since,
                until=now,
                target_precision=args.target_precision,
                min_decisions=args.min_decisions,
                confidence=args.confidence,
                model=model,
                out=out,
                resamples=args.resamples,
                tenant=tenant,
            )
        )
    except (ArgumentError, PolicyFileError, StoreError, ValueError) as exc:
        print(f"modstream policy calibrate: {exc}", file=sys.stderr)
        return _EXIT_UNUSABLE
    report_path.write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2))
    print("\n".join(report_lines(report)))
    if report["proposal"] is None:
        print(f"every category refused: {out} not written; report saved to {report_path}")
        return _EXIT_REFUSED
    calibrated = [p["field"] for p in report["proposals"] if p["threshold"] is not None]
    print(
        f"wrote the proposal {out} ({', '.join(calibrated)}); report saved to {report_path}; "
        f"an admin makes it live with: modstream policy apply {out}"
    )
    return 0


async def apply(settings: WorkerSettings, proposal: Path, target: Path | None, token: str) -> str:
    """Apply ``proposal`` to ``target`` (default ``policy_file.path``) as the admin whose API
    ``token`` this is; what to print."""
    live = target or settings.policy_file.path
    if live is None:
        raise ArgumentError(
            "no live policy file: set MODSTREAM_POLICY_FILE__PATH (as the services do) or --to"
        )
    loaded = read_proposal(proposal, settings.policy)
    if not token:
        raise ArgumentError("no API token given (standard input)")
    async with Database(settings.postgres) as database:
        applied = await apply_proposal(
            loaded,
            target=live,
            base=settings.policy,
            token=token,
            store=PolicyApplicationStore(database),
        )
    return (
        f"applied {proposal} (sha256 {loaded.sha256}) to {live} as {applied.applied_by} "
        f"at {applied.applied_at.isoformat()}"
    )


def _read_token() -> str:
    """The admin's API token: prompted for on a terminal, else the first line of stdin."""
    if sys.stdin.isatty():
        return getpass.getpass("admin API token: ").strip()
    return sys.stdin.readline().strip()


def _run_apply(args: argparse.Namespace) -> int:
    settings = WorkerSettings()
    configure_logging(settings.log_level)
    try:
        token = _read_token()
        line = asyncio.run(
            apply(settings, Path(args.proposal), Path(args.to) if args.to else None, token)
        )
    except (ArgumentError, PolicyFileError) as exc:
        print(f"modstream policy apply: refused: {exc}", file=sys.stderr)
        return _EXIT_UNUSABLE
    except NotAnAdmin as exc:
        print(f"modstream policy apply: refused: {exc}", file=sys.stderr)
        return _EXIT_NOT_ADMIN
    except StoreError as exc:
        print(f"modstream policy apply: PostgreSQL failed ({exc})", file=sys.stderr)
        return _EXIT_STORE
    except OSError as exc:
        print(f"modstream policy apply: cannot write: {type(exc).__name__}", file=sys.stderr)
        return _EXIT_UNUSABLE
    print(line)
    return 0


def check_lines(path: Path, base: PolicyThresholds) -> list[str]:
    """What ``policy check`` prints for the policy file at ``path`` read over ``base``."""
    document = read_policy_file(path)
    try:
        thresholds = resolve_policy(document, base)
    except PolicyFileError as exc:
        raise PolicyFileError(f"{path}: {exc}") from exc
    lines = [f"{'category':<22}{'level':<18}{'flag':>8}{'block':>8}"]
    for line in category_lines(document, thresholds):
        flag, block = (
            next((f for f in line.thresholds if f.startswith(prefix)), None)
            for prefix in ("flag_", "block_")
        )
        level = line.level if line.named else f"{line.level} (settings)"
        cells = [
            _cell(line.thresholds[f], f in line.explicit) if f is not None else "- "
            for f in (flag, block)
        ]
        lines.append(f"{line.category:<22}{level:<18}{cells[0]:>8}{cells[1]:>8}".rstrip())
    band = [f for f in dataclasses.asdict(thresholds) if SHIPPED_LEVELS.category_of(f) is None]
    lines += [
        f"{name} = {getattr(thresholds, name):g}{' *' if name in document.values else ''}"
        for name in band
    ]
    lines.append(
        "* set under [thresholds] (wins over the level); off: the model never flags, blocks or "
        "escalates the category"
    )
    return lines


def _cell(value: float, explicit: bool) -> str:
    shown = "never" if value >= OFF_THRESHOLD else f"{value:g}"
    return f"{shown}{'*' if explicit else ' '}"


def _run_check(args: argparse.Namespace) -> int:
    settings = WorkerSettings()
    try:
        lines = check_lines(Path(args.file), settings.policy)
    except PolicyFileError as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return _EXIT_UNUSABLE
    print("\n".join(lines))
    return 0


def register(subparsers: Any) -> None:
    policy = subparsers.add_parser(
        "policy", help="the policy file: thresholds learnt from moderators, applied, checked"
    )
    commands = policy.add_subparsers(dest="policy_command", required=True, metavar="COMMAND")
    calibrate_parser = commands.add_parser(
        "calibrate",
        help="propose per-category flag thresholds from moderators' decisions (a proposal file)",
    )
    calibrate_parser.add_argument(
        "--since", default="30d", help="decisions resolved since (30d, 12h, or ISO-8601)"
    )
    calibrate_parser.add_argument(
        "--target-precision",
        type=float,
        default=0.9,
        help="share of flagged messages moderators must find harmful (default 0.9)",
    )
    calibrate_parser.add_argument(
        "--min-decisions",
        type=int,
        default=50,
        help="refuse a category with fewer decisions (default 50)",
    )
    calibrate_parser.add_argument(
        "--confidence", type=float, default=0.95, help="interval confidence (default 0.95)"
    )
    calibrate_parser.add_argument(
        "--resamples", type=int, default=1000, help="bootstrap resamples (default 1000)"
    )
    calibrate_parser.add_argument(
        "--model", default=None, help="NAME[:VERSION] of the scored verdicts (default: live)"
    )
    calibrate_parser.add_argument(
        "--tenant",
        default=None,
        help="calibrate this tenant's policy on its own verdicts only (needs the tenant folder)",
    )
    calibrate_parser.add_argument(
        "--out",
        default=None,
        help=(
            f"the proposal to write, never the live file (default {_DEFAULT_OUT}; with "
            "--tenant T, <policy_file.tenants_dir>/T.proposed.toml)"
        ),
    )
    calibrate_parser.add_argument(
        "--report", default=None, help="where to save the JSON report (default beside --out)"
    )
    calibrate_parser.set_defaults(handler=_run_calibrate)
    apply_parser = commands.add_parser(
        "apply",
        help="make a proposal the live policy file (an admin; API token on standard input)",
    )
    apply_parser.add_argument("proposal", help="the proposal file (from policy calibrate)")
    apply_parser.add_argument(
        "--to", default=None, help="the live policy file (default: policy_file.path)"
    )
    apply_parser.set_defaults(handler=_run_apply)
    check = commands.add_parser(
        "check",
        help="load a policy file as the services would: each category's level and thresholds",
    )
    check.add_argument("file", help="the policy file (the default tenant's or a tenant's)")
    check.set_defaults(handler=_run_check)
