"""Call policy: config.json ``policy``, ordered rules that allow, deny or hold for approval a tool call or effect.

::

    {"policy": [
        {"name": "no commands after web content", "tool": "run_command",
         "input_trust": ["external"], "action": "require_approval"},
        {"tool": "run_code", "tenant": "acme", "action": "deny"},
        {"tool": "*", "action": "allow"}]}

A rule names what it governs, ``tool`` (an agent's tool call) or ``effect`` (a step's
``ctx.effect`` key), each a shell-style pattern (``run_*``), and may narrow it by ``workflow``,
``tenant``, ``project`` (patterns too) and by the trust of what the step's input holds:
``untrusted_input: true`` (some chunk is ``tool`` or ``external``), ``false`` (none is), or
``input_trust`` (some chunk carries one of the labels listed). The first rule that matches decides;
when none does, the call is allowed (a policy lists what it holds back). ``action``:

- ``allow``: the call runs;
- ``deny``: it does not; the caller gets an error naming the rule;
- ``require_approval``: the run waits on an approval interrupt that names the rule and shows the
  call; it runs once a human approves (``edit`` approves with the arguments given as its value).

This module decides; ``runtime.flow.policy_gate`` enforces inside a step (interrupts, audit records):
agents ask it before each tool call, ``LiveContext.effect`` before each effect but its own
(``policy:`` audit records and ``decision:`` transcripts are not governed).
A malformed policy is an ``InvalidInputError`` of one line naming the rule and the field, raised by
``Runtime.open`` before anything starts.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Literal, get_args

from runtime.access.store import AuditRecord, AuditStore
from runtime.errors import InvalidInputError, UsageError
from runtime.ids import now
from runtime.sessions.model import Trust

PolicyAction = Literal["allow", "deny", "require_approval"]
CallKind = Literal["tool", "effect"]
ACTIONS: tuple[str, ...] = get_args(PolicyAction)
TRUSTS: tuple[str, ...] = get_args(Trust)
UNTRUSTED = frozenset({"tool", "external"})
CONFIG_FILE = "config.json"
_PATTERNS = ("tool", "effect", "workflow", "tenant", "project")
_FIELDS = {*_PATTERNS, "name", "action", "untrusted_input", "input_trust"}
POLICY_KEY = "policy:"  # effect keys of the policy's own audit records: never governed themselves
EXAMPLE = '[{"tool": "run_command", "input_trust": ["external"], "action": "require_approval"}]'


class PolicyDenied(UsageError):
    """A call a policy rule (or the human it asked) did not let run; the message names the rule."""


@dataclass(frozen=True)
class Call:
    """What a rule is matched against: one tool call or effect about to run."""

    kind: CallKind
    name: str
    workflow: str | None
    tenant: str
    project: str
    input_trust: frozenset[str]
    arguments: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Rule:
    """One rule of the policy; ``number`` is its place in the list, from 1."""

    number: int
    action: PolicyAction
    tool: str | None = None
    effect: str | None = None
    workflow: str | None = None
    tenant: str | None = None
    project: str | None = None
    untrusted_input: bool | None = None
    input_trust: frozenset[str] | None = None
    name: str | None = None

    @property
    def label(self) -> str:
        """How errors, prompts and audit records name the rule: ``policy rule 2 "no commands" (deny)``."""
        named = f" {json.dumps(self.name)}" if self.name else ""
        return f"policy rule {self.number}{named} ({self.action})"

    def matches(self, call: Call) -> bool:
        pattern = self.tool if call.kind == "tool" else self.effect
        if pattern is None or not fnmatchcase(call.name, pattern):
            return False
        for field, value in (("workflow", call.workflow), ("tenant", call.tenant), ("project", call.project)):
            wanted = getattr(self, field)
            if wanted is not None and (value is None or not fnmatchcase(value, wanted)):
                return False
        if self.untrusted_input is not None and self.untrusted_input != bool(call.input_trust & UNTRUSTED):
            return False
        return self.input_trust is None or bool(call.input_trust & self.input_trust)


@dataclass(frozen=True)
class Policy:
    """The ordered rules of config.json's ``policy`` (none: every call is allowed)."""

    rules: tuple[Rule, ...] = ()
    origin: str = CONFIG_FILE

    def decide(self, call: Call) -> Rule | None:
        """The first rule matching ``call``, or None (allowed: no rule holds it back)."""
        return next((rule for rule in self.rules if rule.matches(call)), None)

    def governs(self, kind: CallKind) -> bool:
        """Whether any rule is about ``kind`` (a step need not look at its input's trust otherwise)."""
        return any((rule.tool if kind == "tool" else rule.effect) is not None for rule in self.rules)

    def weighs_trust(self, kind: CallKind, name: str) -> bool:
        """Whether a rule that may match ``name`` looks at the input's trust (worth reading the session)."""
        return any(
            (rule.untrusted_input is not None or rule.input_trust is not None)
            and fnmatchcase(name, (rule.tool if kind == "tool" else rule.effect) or "\x00")
            for rule in self.rules
        )

    @classmethod
    def parse(cls, given: Any, origin: str) -> Policy:
        """From the JSON of ``policy``; anything malformed is one line naming the rule and the field."""
        if given is None:
            return cls((), origin)
        if not isinstance(given, list):
            raise InvalidInputError(f'"policy" in {origin} must be a list of rules, e.g. {EXAMPLE}')
        return cls(tuple(_parse_rule(number, raw, origin) for number, raw in enumerate(given, 1)), origin)


def _parse_rule(number: int, raw: Any, origin: str) -> Rule:
    where = f"policy rule {number} in {origin}"
    if not isinstance(raw, dict):
        raise InvalidInputError(f"{where} must be an object, e.g. {EXAMPLE[1:-1]}")
    unknown = sorted(set(raw) - _FIELDS)
    if unknown:
        raise InvalidInputError(f"{where} has unknown field(s) {unknown}; a rule takes {sorted(_FIELDS)}")
    if raw.get("action") not in ACTIONS:
        raise InvalidInputError(f"{where}: action must be one of {list(ACTIONS)}, got {raw.get('action')!r}")
    if raw.get("tool") is None and raw.get("effect") is None:
        raise InvalidInputError(f'{where} must name a "tool" or an "effect" (a name or a pattern like "run_*")')
    for field in (*_PATTERNS, "name"):
        value = raw.get(field)
        if value is not None and (not isinstance(value, str) or not value):
            raise InvalidInputError(f"{where}: {field} must be a non-empty string, got {value!r}")
    untrusted = raw.get("untrusted_input")
    if untrusted is not None and not isinstance(untrusted, bool):
        raise InvalidInputError(f"{where}: untrusted_input must be true or false, got {untrusted!r}")
    trust = raw.get("input_trust")
    if trust is not None and (
        not isinstance(trust, list) or not trust or not all(isinstance(t, str) and t in TRUSTS for t in trust)
    ):
        raise InvalidInputError(f"{where}: input_trust must be a non-empty list of {list(TRUSTS)}, got {trust!r}")
    return Rule(
        number=number,
        action=raw["action"],
        tool=raw.get("tool"),
        effect=raw.get("effect"),
        workflow=raw.get("workflow"),
        tenant=raw.get("tenant"),
        project=raw.get("project"),
        untrusted_input=untrusted,
        input_trust=None if trust is None else frozenset(trust),
        name=raw.get("name"),
    )


def load_call_policy(home: Path) -> Policy:
    """The policy of a home's ``config.json`` (none when there is no file or it is not JSON: the server
    reports a broken config.json once, elsewhere)."""
    path = home / CONFIG_FILE
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        config = {}
    return Policy.parse(config.get("policy") if isinstance(config, dict) else None, str(path))


class CallPolicy:
    """A runtime's policy, with where its decisions are audited and the scope a call works in."""

    def __init__(self, policy: Policy, audit: AuditStore, scope: Callable[[], tuple[str, str]]) -> None:
        self.policy = policy
        self.audit = audit
        self.scope = scope

    def call(
        self,
        kind: CallKind,
        name: str,
        workflow: str | None,
        input_trust: frozenset[str],
        arguments: Mapping[str, Any] | None = None,
    ) -> Call:
        """``Call`` in the current scope."""
        tenant, project = self.scope()
        return Call(kind, name, workflow, tenant, project, input_trust, arguments)

    async def record(
        self, call: Call, rule: Rule, outcome: str, reason: str, targets: tuple[str, ...], actor: str = "policy"
    ) -> None:
        """One audit record of a decision: actor ``policy`` (or the human who decided), action ``policy.<kind>``."""
        record = AuditRecord(
            at=now(),
            actor=actor,
            tenant=call.tenant,
            project=call.project,
            action=f"policy.{call.kind}",
            outcome=outcome,
            targets=targets,
            reason=f"{rule.label}: {call.kind} {call.name}: {reason}",
            method="policy",
        )
        await self.audit.append([record])
