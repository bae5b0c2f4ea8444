"""``python -m bench.rules --tenants N --stacks K``: what many tenants cost the rule stage.

A tenant folder is written to a temporary directory as an operator would: the base rules
(``bench.rules``' shipped plus generated ones) as the shared layer ``_base.toml``; K stack layers
``_stack<k>.toml`` over it, each as a community writes one (one rule disabled, one action
overridden, one small keyword rule of its own with its examples); and N tenant files
``t<n>.toml`` that each extend one stack (tenant n uses stack n mod K) and differ in a comment,
so the N files are N distinct files. The folder is loaded as the worker loads it
(``engine.tenant_rules_watch``: every layer parsed, one engine per distinct stack reusing the
base engine's matchers for the rules it keeps, as the worker's reuse the default's), timed from
nothing to ready: ``start_s``, with the process's resident memory after it, ``rss_mb``.

The same messages are then evaluated through the rule stage (``RuleStage.evaluate``) for one
tenant (a stage with the base rules alone, as a single-tenant install runs them) and spread
over all N tenants (tenant i of a shuffled list for message i), alternating short blocks of
each so a busy machine slows both alike, and compared in CPU time per message:
``tenant_rule_cost_ratio`` is the spread cost over the one-tenant cost (target 1.2 or less).
"""

from __future__ import annotations

import argparse
import json
import random
import string
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from engine.metrics import Metrics
from engine.rule_stage import RuleStage
from engine.tenant_rules_watch import TenantRulesWatcher
from pipelines.messages import ChatMessage
from pipelines.rules import RuleEngine, parse_ruleset
from pipelines.rules.shared_engines import EngineShelf, resident_bytes

__all__ = ["TARGET_RATIO", "run_tenants", "stack_layer_toml", "write_tenant_folder"]

TARGET_RATIO = 1.2
_DISABLED = ("en.offensive.profanity", "zh.offensive.profanity", "ad.qq_id", "spam.phishing")
_OVERRIDDEN = ("ad.wechat_id", "zh.ad.dm_me", "en.spam.easy_money", "harassment.dogpiling")
_BLOCK_MESSAGES = 250
"""Messages per block of one side before the other side's block."""


def stack_layer_toml(index: int, seed: int) -> str:
    """Stack layer number ``index`` over ``_base.toml``: a rule disabled, an action overridden,
    a keyword rule of its own (six random words) with examples and a near miss."""
    rng = random.Random(seed * 1000 + index)
    words = ["".join(rng.choices(string.ascii_lowercase, k=9)) for _ in range(6)]
    rule_id = f"stack{index}.words"
    listed, shown = json.dumps(words), json.dumps(words[:2])
    return (
        f'extends = "_base.toml"\n'
        f'disable = ["{_DISABLED[index % len(_DISABLED)]}"]\n\n'
        f'[overrides."{_OVERRIDDEN[index % len(_OVERRIDDEN)]}"]\n'
        f'action = "{("escalate", "block")[index % 2]}"\n\n'
        f'[[rules]]\nid = "{rule_id}"\ncategory = "spam"\nseverity = "medium"\n'
        f'action = "flag"\nkind = "keywords"\nkeywords = {listed}\n\n'
        f'[[examples]]\nid = "{rule_id}"\nexamples = {shown}\n'
        f'near_misses = ["an ordinary line about the weather"]\n'
    )


def write_tenant_folder(folder: Path, base: str, tenants: int, stacks: int, seed: int) -> None:
    """The base, the stack layers and the tenant files (module docstring)."""
    (folder / "_base.toml").write_text(base, encoding="utf-8")
    for index in range(stacks):
        (folder / f"_stack{index}.toml").write_text(stack_layer_toml(index, seed), "utf-8")
    for tenant in range(tenants):
        text = f'# tenant {tenant}\nextends = "_stack{tenant % stacks}.toml"\n'
        (folder / f"t{tenant:05d}.toml").write_text(text, encoding="utf-8")


def _block(stage: RuleStage, messages: Sequence[ChatMessage], start: int) -> float:
    """CPU seconds to evaluate ``_BLOCK_MESSAGES`` messages from ``start``."""
    count = len(messages)
    began = time.process_time()
    for offset in range(start, start + _BLOCK_MESSAGES):
        stage.evaluate(messages[offset % count])
    return time.process_time() - began


def _spread(messages: Sequence[ChatMessage], tenants: Sequence[str]) -> list[ChatMessage]:
    """The messages again, each sent by the tenants in turn (every text meets many stacks)."""
    total = 3 * max(len(messages), len(tenants))
    return [
        replace(messages[index % len(messages)], tenant=tenants[index % len(tenants)])
        for index in range(total)
    ]


def run_tenants(args: argparse.Namespace, base: str, messages: list[ChatMessage]) -> int:
    """Measure (module docstring) and print the figures; the last line is the result."""
    started = time.perf_counter()
    single = RuleStage(RuleEngine(parse_ruleset(base), spans=not args.no_spans), Metrics())
    print(f"one tenant: rules loaded in {time.perf_counter() - started:.2f}s")
    with tempfile.TemporaryDirectory(prefix="bench-tenants-") as scratch:
        folder = Path(scratch)
        write_tenant_folder(folder, base, args.tenants, args.stacks, args.seed)
        rss_before = resident_bytes()
        started = time.perf_counter()
        stage = RuleStage(single.engine, Metrics())
        shelf = EngineShelf(
            args.stacks + 1,
            lambda st, base: RuleEngine(st.ruleset, spans=not args.no_spans, base=base),
        )
        shelf.add(single.engine)
        watcher = TenantRulesWatcher(folder, 1.0, stage, shelf, max_tenants=args.tenants)
        loaded = watcher.load_all()
        start_s = time.perf_counter() - started
    rss_mb = resident_bytes() / (1 << 20)
    for built in shelf.built()[1:]:
        print(f"engine {built.stack}: build_s={built.build_s:.3f} rss_mb={built.rss_mb:.1f}")
    print(
        f"tenants={loaded} engines={len(stage.engines())} rejected={watcher.rejections}"
        f" start_s={start_s:.2f} (all tenant files and engines)"
        f" rss_growth_mb={(resident_bytes() - rss_before) / (1 << 20):.0f}"
    )
    tenant_ids = sorted(stage.tenants)
    random.Random(args.seed).shuffle(tenant_ids)
    spread = _spread(messages, tenant_ids)
    for offset in range(0, len(spread), _BLOCK_MESSAGES):  # warm every engine's caches
        _block(single, messages, offset)
        _block(stage, spread, offset)
    single_cpu = spread_cpu = 0.0
    done = 0
    deadline = time.perf_counter() + 2 * args.seconds
    while time.perf_counter() < deadline:
        single_cpu += _block(single, messages, done)
        spread_cpu += _block(stage, spread, done)
        done += _BLOCK_MESSAGES
    ratio = spread_cpu / single_cpu
    print(
        f"messages={done} per side: one_tenant_us={single_cpu / done * 1e6:.1f}"
        f" {args.tenants}_tenants_us={spread_cpu / done * 1e6:.1f} target_ratio={TARGET_RATIO}"
    )
    print(f"tenant_rule_cost_ratio={ratio:.3f} start_s={start_s:.1f} rss_mb={rss_mb:.0f}")
    return 0
