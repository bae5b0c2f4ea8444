"""``modstream rules check FILE``: load a rule file or layer as the services would, and say what
it makes of the rules, or why it is refused.

The file's stack (``pipelines.rules.layers``: the file, what it ``extends``, down to its base)
is loaded and, layer by layer from the base up, what each layer changed is printed: the rules it
added, disabled and overrode, each with the fields it changed and what the rule becomes. Then
each layer's own examples, near misses and everyday lines (``[[examples]]``, ``[everyday]``;
the shipped default's are checked by the test suite) run against the stack as it stands at that
layer (``pipelines.rules.example_check``), and the engine is built once to say what it costs:
seconds and resident memory. Exit 0 when the file loads and its examples hold, 1 when an example
does not hold, 2 when the file is refused (the error names the layer, the rule and the problem).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from pipelines.rules import RuleLoadError
from pipelines.rules.config import ProfileRule, Rule
from pipelines.rules.example_check import check_stack, examples_count
from pipelines.rules.layers import DEFAULT_LAYER, ChangeKind, RuleChange, load_rule_stack
from pipelines.rules.shared_engines import EngineShelf
from pipelines.severe_harm import SHIPPED

__all__ = ["register"]

_EXIT_EXAMPLES = 1
_EXIT_REFUSED = 2


def _value(value: object) -> str:
    return "(unset)" if value is None else repr(value)


def _becomes(rule: Rule) -> str:
    meta = rule.meta
    state = "" if meta.enabled else ", disabled"
    kind = "profile" if isinstance(rule, ProfileRule) else type(rule).__name__[:-4].lower()
    return f"{kind} rule: {meta.category}, {meta.severity.name.lower()}, {meta.action}{state}"


def _describe(change: RuleChange, rule: Rule) -> list[str]:
    lines = [f"  {change.rule_id}: {change.kind}"]
    lines += [f"    {name}: {_value(old)} -> {_value(new)}" for name, old, new in change.fields]
    if change.kind is not ChangeKind.DISABLED:
        lines.append(f"    becomes {_becomes(rule)}")
    return lines


def _run_check(args: argparse.Namespace) -> int:
    path = Path(args.file)
    try:
        stack = load_rule_stack(path)
    except RuleLoadError as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return _EXIT_REFUSED
    print(f"stack: {' > '.join(stack.names)}")
    rules = {rule.meta.id: rule for rule in stack.ruleset.rules}
    for layer in stack.layers:
        if layer.name == DEFAULT_LAYER:
            print(f"layer {layer.name}: the shipped set, {len(layer.changes)} rules")
            continue
        print(f"layer {layer.name}: {len(layer.changes)} changes")
        for change in layer.changes:
            print("\n".join(_describe(change, rules[change.rule_id])))
    for category in stack.severe.categories[len(SHIPPED.categories) :]:
        flags = [f for f in ("urgent", "never_blocked") if getattr(category, f)]
        print(f"severe category {category.name}: floor {category.floor:g} {' '.join(flags)}")
    shelf = EngineShelf(max_engines=len(stack.layers) + 1)
    built, _ = shelf.engine_for(stack)
    failures = check_stack(
        stack, lambda s: shelf.engine_for(s)[0].engine, below=True, skip={DEFAULT_LAYER}
    )
    checked = sum(
        examples_count(layer.examples) for layer in stack.layers if layer.name != DEFAULT_LAYER
    )
    for failure in failures:
        print(f"example fails: {failure}")
    print(f"examples: {checked} checked, {len(failures)} failed")
    enabled = len(stack.ruleset.enabled)
    print(
        f"engine: {len(stack.ruleset.rules)} rules ({enabled} enabled),"
        f" built in {built.build_s:.2f} s, about {built.rss_mb:.1f} MiB resident"
    )
    return _EXIT_EXAMPLES if failures else 0


def register(subparsers: Any) -> None:
    rules = subparsers.add_parser("rules", help="rule files and layers: check what they make")
    commands = rules.add_subparsers(dest="rules_command", required=True, metavar="COMMAND")
    check = commands.add_parser(
        "check", help="load a rule file or layer as the services would and print what it changes"
    )
    check.add_argument("file", help="the rule file or layer (a tenant file, say)")
    check.set_defaults(handler=_run_check)
