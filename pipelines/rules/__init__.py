"""The rule engine: TOML rule sets of keyword, regex and user-profile rules.

Build a ``RuleEngine`` once from ``default_ruleset()`` or ``load_ruleset(path)`` and call
``evaluate(message)`` per message; it is pure and holds no per-message state. A rule file that
``extends`` another (a layer) is loaded with ``pipelines.rules.layers.load_rule_stack``; tenants'
engines are shared through ``pipelines.rules.shared_engines``.
"""

from pipelines.rules.config import (
    KeywordRule,
    ProfileRule,
    RegexRule,
    Rule,
    RuleLoadError,
    RuleSet,
    default_ruleset,
    load_ruleset,
    parse_ruleset,
)
from pipelines.rules.engine import RuleEngine

__all__ = [
    "KeywordRule",
    "ProfileRule",
    "RegexRule",
    "Rule",
    "RuleEngine",
    "RuleLoadError",
    "RuleSet",
    "default_ruleset",
    "load_ruleset",
    "parse_ruleset",
]
