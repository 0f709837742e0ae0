"""Config.json's call policy (``runtime.policy``) enforced inside a durable step.

``tool_gate(ctx, workflow)`` is the ``ToolGate`` an agent asks before each tool call:

- no rule matches: the call runs, nothing is recorded;
- ``allow``: it runs; ``deny``: it does not, and the model reads an error naming the rule;
- ``require_approval``: the run parks on an ``approval`` interrupt naming the rule and showing the
  call; approve runs it, edit runs it with the arguments given as the decision's value, reject or
  respond refuses it (the model reads who refused it and why).

Every decision is an audit record (``rath-mcp audit``: action ``policy.tool``), written through the
step's effect ledger so a step run again (a resume after the approval, a retry after a crash) does
not record it twice. The gate runs before the call's own effect is dispatched: a call waiting for
approval has not started, so the interrupt cannot leave a half-run command behind.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from runtime.flow.workflow import EffectClass, StepContext
from runtime.policy import POLICY_KEY, Call, PolicyDenied, Rule
from runtime.sessions.model import ToolCall

if TYPE_CHECKING:
    from runtime.durable.models import Decision
    from runtime.flow.tools import FlowToolCall, ToolGate

_APPROVAL_SCHEMA = {
    "type": "object",
    "description": "edit: the arguments to run the call with instead (a JSON object)",
}


def tool_gate(ctx: StepContext, workflow: str) -> ToolGate | None:
    """The gate of ``workflow``'s agent tool calls in this step (None when no rule is about tools)."""
    governed = ctx.runtime.policy
    if not governed.policy.governs("tool"):
        return None
    # Imported here, not at the top: every durable step's effect gate imports this module, and a server
    # start must not load the agent stack's tools module (tests/test_cold_start.py).
    from runtime.flow.tools import ToolArgumentsError

    async def gate(
        tool: FlowToolCall, call: ToolCall, arguments: dict[str, Any], key: str, input_trust: frozenset[str]
    ) -> dict[str, Any]:
        asked = governed.call("tool", tool.name, workflow, input_trust, arguments)
        rule = governed.policy.decide(asked)
        if rule is None:
            return arguments
        decision = await _enforce(ctx, asked, rule, key, (ctx.run_id, call.id), workflow)
        if decision is None or decision.action == "approve":
            return arguments
        try:  # edit: approved with the arguments given as the value
            value = decision.value
            return tool.check_arguments(value if isinstance(value, str) else json.dumps(value))
        except ToolArgumentsError as exc:
            raise ToolArgumentsError(f"the arguments {decision.actor} approved: {exc}") from None

    return gate


async def effect_gate(ctx: StepContext, key: str, workflow: str | None) -> None:
    """The policy over a step's effect ``key`` (``LiveContext.effect`` asks before it runs or replays one):
    returns to let it run, raises ``PolicyDenied`` (the step fails, unless it catches it), or parks the run.
    The step's input is the run's session so far (its output session, else its input session)."""
    governed = ctx.runtime.policy
    trust: frozenset[str] = frozenset()
    session_id = ctx.output_session_id or ctx.session_id
    if session_id is not None and governed.policy.weighs_trust("effect", key):
        trust = frozenset(chunk.trust for chunk in (await ctx.runtime.sessions.get(session_id)).chunks)
    asked = governed.call("effect", key, workflow, trust)
    rule = governed.policy.decide(asked)
    if rule is not None:
        await _enforce(ctx, asked, rule, key, (ctx.run_id,), workflow)


async def _enforce(
    ctx: StepContext, asked: Call, rule: Rule, key: str, targets: tuple[str, ...], workflow: str | None
) -> Decision | None:
    """Apply ``rule`` to ``asked``: None (allowed), the human's approving decision, or ``PolicyDenied``.
    Each decision is audited once, through the step's effect ledger (keys ``policy:KEY``)."""
    governed = ctx.runtime.policy
    what = f"{asked.kind} {asked.name}"

    async def audit(suffix: str, outcome: str, reason: str, actor: str = "policy") -> None:
        async def write() -> None:
            await governed.record(asked, rule, outcome, reason, targets, actor)

        await ctx.effect(f"{POLICY_KEY}{key}{suffix}", write, EffectClass.IDEMPOTENT)

    if rule.action == "allow":
        await audit("", "ok", "allowed")
        return None
    if rule.action == "deny":
        await audit("", "refused", "denied")
        raise PolicyDenied(f"{rule.label} does not let {what} run here{_because(rule, asked)}")
    await audit("", "ok", "approval asked")
    prompt = approval_prompt(rule, asked, workflow)
    decision = await ctx.interrupt("approval", prompt=prompt, schema=_APPROVAL_SCHEMA if asked.kind == "tool" else None)
    by = f"{decision.actor}" + (f" ({decision.reason})" if decision.reason else "")
    if decision.action == "approve" or (decision.action == "edit" and asked.kind == "tool"):
        edited = " with edited arguments" if decision.action == "edit" else ""
        await audit(":decided", "ok", f"approved{edited} by {by}", decision.actor)
        return decision
    await audit(":decided", "refused", f"refused by {by}", decision.actor)
    why = decision.reason or decision.value
    raise PolicyDenied(f"{rule.label}: {decision.actor} did not approve {what}" + (f": {why}" if why else ""))


def _because(rule: Rule, call: Call) -> str:
    """Why the rule matched, when trust was part of it (the prompt-injection case)."""
    held = sorted(call.input_trust & (rule.input_trust or frozenset({"tool", "external"})))
    if (rule.input_trust is None and not rule.untrusted_input) or not held:
        return ""
    return f" (the step's input holds {' and '.join(held)} content)"


def approval_prompt(rule: Rule, call: Call, workflow: str | None) -> str:
    """The question a human answers: the rule, the call and its arguments, what each answer does."""
    held = f"{rule.label} holds this call for approval{_because(rule, call)}.\n\n"
    if call.kind == "effect":
        return held + (
            f"workflow {workflow}, effect {call.name} of the step.\n\n"
            "approve: let it run; reject: do not (the step fails with your reason)."
        )
    shown = json.dumps(dict(call.arguments or {}), indent=2, ensure_ascii=False)
    return held + (
        f"workflow {workflow}, tool {call.name}, arguments:\n{shown}\n\n"
        "approve: run it; edit: run it with the arguments given as the value; reject: do not run it "
        "(the agent is told)."
    )
