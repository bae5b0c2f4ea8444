"""``python -m bench.rules``: rule-engine throughput on one core, canonicalisation included.

The shipped rules plus ``--keywords`` generated keywords (Latin and Chinese, in one extra keyword
rule per thousand) and ``--regexes`` generated RE2 patterns are loaded into one ``RuleEngine``;
chat messages built from ``pipelines/samples/chat.jsonl`` (one to three sample lines joined, a
few of them disguised with leetspeak, spacing and Traditional characters) are evaluated, each
from its raw text, for ``--seconds``. The process is pinned to one CPU where the OS allows.
Every hit is located (``RuleHit.spans``) unless ``--no-spans``: run both to see what locating
costs (``with_hits`` says how many messages paid it).

The last line is ``rules_msgs_per_s=N target=20000``: messages per second of CPU time of this
one-threaded process (the wall-clock rate is printed above it; on a shared machine it is lower).

``--tenants N --stacks K`` measures what tenants cost instead (``bench.tenant_rules``): the
same rules as the base of K distinct layer stacks, N tenant files over them in a tenant folder,
loaded as the worker loads them, and the same messages evaluated for one tenant and spread over
all N; the last line is ``tenant_rule_cost_ratio=R start_s=S rss_mb=M``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import string
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib import resources

from bench.tenant_rules import run_tenants
from pipelines.messages import ChatMessage
from pipelines.rules import RuleEngine, parse_ruleset

__all__ = [
    "TARGET_MSGS_PER_S",
    "base_rules_toml",
    "chat_messages",
    "extra_rules_toml",
    "generated_keywords",
    "generated_patterns",
    "main",
    "parse_args",
]

TARGET_MSGS_PER_S = 20_000
_KEYWORDS_PER_RULE = 1_000
_HAN_FIRST, _HAN_LAST = 0x4E00, 0x9FA5
_DISGUISES = (
    "f u c k this",
    "what a sh1t show",
    "傻 逼",
    "說話算話",
    "nmsl",
    "visit scam[.]com",
)


def generated_keywords(count: int, seed: int) -> list[str]:
    """``count`` distinct keywords: two in three are Latin words of 5 to 10 letters (sometimes
    two words), one in three are two to four Han characters."""
    rng = random.Random(seed)
    found: dict[str, None] = {}
    while len(found) < count:
        if rng.randrange(3):
            word = "".join(rng.choices(string.ascii_lowercase, k=rng.randint(5, 10)))
            if not rng.randrange(5):
                word += " " + "".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 7)))
        else:
            word = "".join(
                chr(rng.randint(_HAN_FIRST, _HAN_LAST)) for _ in range(rng.randint(2, 4))
            )
        found[word] = None
    return list(found)


def generated_patterns(count: int, seed: int) -> list[str]:
    """``count`` RE2 patterns of the shapes rule authors write: a word and a number, two words
    near each other, a word with alternatives."""
    rng = random.Random(seed)

    def word() -> str:
        return "".join(rng.choices(string.ascii_lowercase, k=rng.randint(4, 8)))

    patterns: list[str] = []
    for index in range(count):
        shape = index % 3
        if shape == 0:
            patterns.append(rf"\b{word()} ?\d{{3,6}}\b")
        elif shape == 1:
            patterns.append(rf"\b{word()}\b.{{0,20}}\b{word()}\b")
        else:
            patterns.append(rf"\b(?:{word()}|{word()}|{word()})(?:s|ed|ing)?\b")
    return patterns


def extra_rules_toml(keywords: Sequence[str], patterns: Sequence[str]) -> str:
    """TOML ``[[rules]]`` tables holding ``keywords`` and ``patterns`` (flag, low severity)."""
    tables: list[str] = []
    for start in range(0, len(keywords), _KEYWORDS_PER_RULE):
        chunk = keywords[start : start + _KEYWORDS_PER_RULE]
        tables.append(
            f'[[rules]]\nid = "bench.kw.{start // _KEYWORDS_PER_RULE}"\ncategory = "bench"\n'
            f'severity = "low"\naction = "flag"\nkind = "keywords"\n'
            f"keywords = {json.dumps(list(chunk), ensure_ascii=False)}\n"
        )
    if patterns:
        quoted = ", ".join(f"'''{pattern}'''" for pattern in patterns)
        tables.append(
            '[[rules]]\nid = "bench.re"\ncategory = "bench"\nseverity = "low"\n'
            f'action = "flag"\nkind = "regex"\npatterns = [{quoted}]\n'
        )
    return "\n".join(tables)


def chat_messages(count: int, seed: int) -> list[ChatMessage]:
    """``count`` messages of one to three sample lines each; one in twenty is disguised."""
    raw = resources.files("pipelines").joinpath("samples/chat.jsonl").read_text("utf-8")
    texts = [json.loads(line)["text"] for line in raw.splitlines() if line.strip()]
    rng = random.Random(seed)
    sent_at = datetime(2026, 1, 1, tzinfo=UTC)
    messages: list[ChatMessage] = []
    for index in range(count):
        lines = [rng.choice(texts) for _ in range(rng.choice((1, 1, 2, 3)))]
        if not rng.randrange(20):
            lines.append(rng.choice(_DISGUISES))
        messages.append(ChatMessage(f"m-{index}", "g-1", "u-1", " ".join(lines), sent_at, {}))
    return messages


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.rules", description=__doc__)
    parser.add_argument("--keywords", type=int, default=10_000, help="extra keywords")
    parser.add_argument("--regexes", type=int, default=100, help="extra regex patterns")
    parser.add_argument("--messages", type=int, default=20_000, help="distinct messages")
    parser.add_argument("--seconds", type=float, default=3.0, help="measuring time")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--tenants", type=int, default=0, help="tenant files (0: measure one rule set alone)"
    )
    parser.add_argument("--stacks", type=int, default=10, help="distinct stacks the tenants use")
    parser.add_argument(
        "--no-spans",
        action="store_true",
        help="do not locate the hits (RuleHit.spans), to measure what locating costs",
    )
    args = parser.parse_args(argv)
    if args.keywords < 0 or args.regexes < 0 or args.messages < 1 or args.seconds <= 0:
        parser.error("counts must be >= 0 (messages >= 1) and seconds > 0")
    if args.tenants < 0 or (args.tenants and not 1 <= args.stacks <= args.tenants):
        parser.error("--tenants must be >= 0 and --stacks between 1 and --tenants")
    return args


def _pin_one_core() -> str:
    if not hasattr(os, "sched_setaffinity"):
        return "not pinned"
    allowed = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {allowed[-1]})
    return f"pinned to cpu {allowed[-1]}"


def base_rules_toml(args: argparse.Namespace) -> str:
    """The shipped rules and the generated keywords and patterns, as one rule file."""
    base = resources.files("pipelines").joinpath("rulesets/default.toml").read_text("utf-8")
    extra = extra_rules_toml(
        generated_keywords(args.keywords, args.seed), generated_patterns(args.regexes, args.seed)
    )
    return base + "\n" + extra


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    print(_pin_one_core())
    if args.tenants:
        return run_tenants(args, base_rules_toml(args), chat_messages(args.messages, args.seed))
    started = time.perf_counter()
    engine = RuleEngine(parse_ruleset(base_rules_toml(args)), spans=not args.no_spans)
    print(
        f"rules loaded in {time.perf_counter() - started:.2f}s ({len(engine.ruleset.rules)} rules)"
    )
    messages = chat_messages(args.messages, args.seed)
    for message in messages[:200]:  # warm the caches a long-running worker has warm
        engine.evaluate(message)
    done = hits = 0
    started = time.perf_counter()
    cpu_started = time.process_time()
    deadline = started + args.seconds
    while time.perf_counter() < deadline:
        for message in messages[done % len(messages) :][:1000]:
            hits += bool(engine.evaluate(message).hits)
            done += 1
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    print(f"messages={done} with_hits={hits} wall_s={elapsed:.2f} cpu_s={cpu:.2f}")
    print(f"wall_msgs_per_s={done / elapsed:.0f} (lower when other processes share the core)")
    print(f"rules_msgs_per_s={done / cpu:.0f} target={TARGET_MSGS_PER_S}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
