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
from typing import Any

from runtime.flow.tools import FlowToolCall, ToolArgumentsError, ToolGate
from runtime.flow.workflow import EffectClass, StepContext
from runtime.policy import Call, PolicyDenied, Rule
from runtime.sessions.model import ToolCall

_APPROVAL_SCHEMA = {
    "type": "object",
    "description": "edit: the arguments to run the call with instead (a JSON object)",
}


def tool_gate(ctx: StepContext, workflow: str) -> ToolGate | None:
    """The gate of ``workflow``'s agent tool calls in this step (None when no rule is about tools)."""
    governed = ctx.runtime.policy
    if not governed.policy.governs("tool"):
        return None

    async def gate(
        tool: FlowToolCall, call: ToolCall, arguments: dict[str, Any], key: str, input_trust: frozenset[str]
    ) -> dict[str, Any]:
        asked = governed.call("tool", tool.name, workflow, input_trust, arguments)
        rule = governed.policy.decide(asked)
        if rule is None:
            return arguments
        targets = (ctx.run_id, call.id)

        async def audit(suffix: str, outcome: str, reason: str, actor: str = "policy") -> None:
            async def write() -> None:
                await governed.record(asked, rule, outcome, reason, targets, actor)

            await ctx.effect(f"policy:{key}{suffix}", write, EffectClass.IDEMPOTENT)

        if rule.action == "allow":
            await audit("", "ok", "allowed")
            return arguments
        if rule.action == "deny":
            await audit("", "refused", "denied")
            raise PolicyDenied(f"{rule.label} does not let tool {tool.name} run here{_because(rule, asked)}")
        await audit("", "ok", "approval asked")
        prompt = approval_prompt(rule, asked, workflow)
        decision = await ctx.interrupt("approval", prompt=prompt, schema=_APPROVAL_SCHEMA)
        by = f"{decision.actor}" + (f" ({decision.reason})" if decision.reason else "")
        if decision.action == "approve":
            await audit(":decided", "ok", f"approved by {by}", decision.actor)
            return arguments
        if decision.action == "edit":
            await audit(":decided", "ok", f"approved with edited arguments by {by}", decision.actor)
            value = decision.value
            try:
                return tool.check_arguments(value if isinstance(value, str) else json.dumps(value))
            except ToolArgumentsError as exc:
                raise ToolArgumentsError(f"the arguments {decision.actor} approved: {exc}") from None
        await audit(":decided", "refused", f"refused by {by}", decision.actor)
        raise PolicyDenied(f"{rule.label}: {decision.actor} did not approve this call of {tool.name}" + (
            f": {decision.reason or decision.value}" if decision.reason or decision.value else ""
        ))  # fmt: skip

    return gate


def _because(rule: Rule, call: Call) -> str:
    """Why the rule matched, when trust was part of it (the prompt-injection case)."""
    held = sorted(call.input_trust & (rule.input_trust or frozenset({"tool", "external"})))
    if (rule.input_trust is None and not rule.untrusted_input) or not held:
        return ""
    return f" (the step's input holds {' and '.join(held)} content)"


def approval_prompt(rule: Rule, call: Call, workflow: str) -> str:
    """The question a human answers: the rule, the call and its arguments, what each answer does."""
    shown = json.dumps(dict(call.arguments or {}), indent=2, ensure_ascii=False)
    return (
        f"{rule.label} holds this call for approval{_because(rule, call)}.\n\n"
        f"workflow {workflow}, tool {call.name}, arguments:\n{shown}\n\n"
        "approve: run it; edit: run it with the arguments given as the value; reject: do not run it "
        "(the agent is told)."
    )
