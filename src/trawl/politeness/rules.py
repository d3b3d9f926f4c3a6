"""Operator rules a running crawl picks up within a second: a host's minimum delay, a
blocked host, blocked URL patterns. Set through the API (``trawl serve``), kept in the
store's ``meta`` (key ``operator_rules``, JSON), read by every worker about twice a
second. A blocked URL is recorded FAILED with error ``operator_blocked`` when its turn
comes, instead of being fetched.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trawl.store.protocols import Store

RULES_KEY = "operator_rules"
BLOCKED_ERROR = "operator_blocked"

log = logging.getLogger("trawl.politeness.rules")


@dataclass(frozen=True, slots=True)
class HostRule:
    """What the operator set for one host (``host[:port]``, as the crawl names it)."""

    delay: float | None = None
    """Least seconds between two requests to the host, whatever the crawl's delay."""
    blocked: bool = False


@dataclass(frozen=True, slots=True)
class OperatorRules:
    hosts: dict[str, HostRule] = field(default_factory=dict)
    patterns: tuple[str, ...] = ()
    """Regular expressions; a URL matching any of them is not fetched."""
    _compiled: tuple[re.Pattern[str], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_compiled", tuple(re.compile(p) for p in self.patterns))

    def _rule(self, host: str) -> HostRule | None:
        """The rule for ``host`` (``name:port``), set for it or for its name alone."""
        return self.hosts.get(host) or self.hosts.get(host.rpartition(":")[0] or host)

    def blocks(self, host: str, url: str) -> bool:
        rule = self._rule(host)
        if rule is not None and rule.blocked:
            return True
        return any(pattern.search(url) for pattern in self._compiled)

    def delay_of(self, host: str) -> float:
        rule = self._rule(host)
        return rule.delay if rule is not None and rule.delay is not None else 0.0

    def to_json(self) -> str:
        hosts = {name: {"delay": r.delay, "blocked": r.blocked} for name, r in self.hosts.items()}
        return json.dumps({"hosts": hosts, "patterns": list(self.patterns)}, sort_keys=True)

    def as_dict(self) -> dict[str, Any]:
        result: dict[str, Any] = json.loads(self.to_json())
        return result

    @classmethod
    def from_json(cls, text: str | None) -> OperatorRules:
        """The stored rules (none stored: no rules)."""
        if not text:
            return cls()
        data = json.loads(text)
        hosts = {
            name: HostRule(rule.get("delay"), bool(rule.get("blocked")))
            for name, rule in data["hosts"].items()
        }
        return cls(hosts, tuple(data["patterns"]))


class LiveRules:
    """The operator's rules as the store last had them (none until first read)."""

    def __init__(self) -> None:
        self.rules = OperatorRules()
        self._text: str | None = None

    async def read(self, store: Store) -> None:
        """Pick up the stored rules when they changed; unreadable ones are ignored (the
        rules in force stay) and logged."""
        text = await store.get_meta(RULES_KEY)
        if text == self._text:
            return
        try:
            self.rules = OperatorRules.from_json(text)
        except (ValueError, KeyError, TypeError, re.error) as exc:
            log.warning("ignoring unreadable operator rules: %s", exc)
        self._text = text
