"""``team``: a planner, a researcher, a coder and a reviewer, the next one chosen by a ``Selector``.

The graph: ``begin`` (prepare the session, choose the first member) → ``route`` (a router that
reads the choice from the state) → one member step → ``route`` … → ``finish``. Each member is an
``Agent`` with its own system prompt and the workspace tools; after it has acted, the Selector
chooses who goes next, or ``finish``. Every choice is written to the session as a short ``user``
chunk named ``team`` (with the selection's token usage), so the transcript shows who acted and why.

An unusable choice falls back to the planner on the first turn and to ``finish`` later (a team
that cannot tell who should act next stops rather than loops); ``max_turns`` caps the members'
turns. Each member's agent runs journaled on its step's effect ledger (model answers, tool calls,
appends), and each choice is an idempotent effect, so a step run again replays instead of redoing.
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any

from runtime.flow.workflow import EffectClass, StepContext, Workflow, router, step
from runtime.providers.config import PROVIDER_NAMES
from runtime.workflows.agent import journaled_input_session, provider_for, result_state, workspace_tools

if TYPE_CHECKING:  # the agent stack is imported by the steps that run it, not by every server start
    from runtime.flow.selector import Choice

MEMBERS: dict[str, tuple[str, str]] = {
    "planner": (
        "breaks the task into short, concrete steps",
        "You are the planner of a small team. Break the task into short numbered steps and say who should "
        "do each (researcher, coder, reviewer). Do not write code yourself.",
    ),
    "researcher": (
        "looks up facts and inspects the workspace's files",
        "You are the researcher of a small team. Use the tools to inspect the workspace and gather the facts "
        "the task needs. Report your findings briefly.",
    ),
    "coder": (
        "writes and runs code in the workspace",
        "You are the coder of a small team. Write and run code in the workspace with the tools. Report what "
        "you changed and what running it showed.",
    ),
    "reviewer": (
        "checks the work against the task and says what is missing",
        "You are the reviewer of a small team. Check the work so far against the task (use the tools to look). "
        "Say plainly what is wrong, or that it is done, and give the final answer if it is.",
    ),
}
FINISH = "finish"
INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "message": {"type": "string", "description": "the task (appended to the session when one is given)"},
        "provider": {"type": "string", "enum": list(PROVIDER_NAMES)},
        "max_turns": {"type": "integer", "minimum": 1, "maximum": 20},
        "max_rounds": {"type": "integer", "minimum": 1, "maximum": 50},
        "token_budget": {"type": "integer", "minimum": 1, "description": "per member turn"},
    },
}


def _choices() -> list[Choice]:
    from runtime.flow.selector import Choice

    members = [Choice(name, about) for name, (about, _) in MEMBERS.items()]
    return [*members, Choice(FINISH, "the task is done: end with the last answer")]


class Team(Workflow):
    """A team of agents (planner, researcher, coder, reviewer) on the session's sandbox; a Selector picks
    who acts next until it chooses finish or max_turns is reached."""

    name = "team"
    input_schema = INPUT_SCHEMA

    @step(entry=True, effects=EffectClass.IDEMPOTENT, successors=["route"])
    async def begin(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        provider_for(ctx)  # first: a team that cannot have a model writes nothing
        session = await journaled_input_session(ctx)
        return await self._choose({**state, "session_id": session.id, "turns": []}, ctx)

    @router(successors=[*MEMBERS, FINISH])
    async def route(self, state: dict[str, Any], ctx: StepContext) -> str:
        return str(state["next"])

    @step(effects=EffectClass.NON_IDEMPOTENT, successors=["route"])
    async def planner(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        return await self._member("planner", state, ctx)

    @step(effects=EffectClass.NON_IDEMPOTENT, successors=["route"])
    async def researcher(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        return await self._member("researcher", state, ctx)

    @step(effects=EffectClass.NON_IDEMPOTENT, successors=["route"])
    async def coder(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        return await self._member("coder", state, ctx)

    @step(effects=EffectClass.NON_IDEMPOTENT, successors=["route"])
    async def reviewer(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        return await self._member("reviewer", state, ctx)

    @step(effects=EffectClass.READ_ONLY)
    async def finish(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        ctx.set_output_session(state["session_id"])
        answers = [t["answer"] for t in state["turns"] if t.get("answer")]
        return {**state, "answer": answers[-1] if answers else "", "output_session_id": state["session_id"]}

    def result(self, state: dict[str, Any]) -> dict[str, Any]:
        turns = state.get("turns", [])
        members = list(dict.fromkeys(t["member"] for t in turns))
        return {"answer": state.get("answer"), "members": members, "turns": len(turns), "why": state.get("why")}

    async def _member(self, member: str, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        from runtime.flow.agent import Agent, MemoryOptions
        from runtime.flow.policy_gate import tool_gate

        rt, inp = ctx.runtime, ctx.input
        session = await rt.sessions.get(state["session_id"])
        async with AsyncExitStack() as stack:
            agent = Agent(
                MEMBERS[member][1],
                rt.providers.get(inp.get("provider")),
                await workspace_tools(ctx, session, stack, workflow=self.name),
                memory=MemoryOptions() if member == "researcher" else False,
                max_rounds=int(inp.get("max_rounds", 6)),
                token_budget=inp.get("token_budget"),
                name=member,
                on_delta=ctx.text,
            )
            gate = tool_gate(ctx, self.name)
            result = await agent.run(rt, session.id, progress=ctx.progress, journal=ctx.effect, gate=gate)
        outcome = result_state(result)
        turn = {"member": member, **{k: outcome[k] for k in ("answer", "truncated", "rounds", "stop")}}
        next_state = {**state, "session_id": outcome["output_session_id"], "turns": [*state["turns"], turn]}
        ctx.set_output_session(outcome["output_session_id"])
        return await self._choose(next_state, ctx)

    async def _choose(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        """Pick the next member (or finish) and note the choice in the session."""
        turns = len(state["turns"])
        if turns >= int(ctx.input.get("max_turns", 6)):
            return {**state, "next": FINISH, "why": f"max_turns ({turns}) reached"}

        async def select() -> dict[str, Any]:
            from runtime.flow.selector import Selector

            rt = ctx.runtime
            fallback = "planner" if turns == 0 else FINISH
            selector = Selector(rt.providers.get(ctx.input.get("provider")), _choices(), default=fallback)
            choice = await selector.select(rt, state["session_id"])
            note = {"kind": "user", "name": "team", "content": f"[team] next: {choice.name}. {choice.reason}"}
            info = await rt.sessions.append(state["session_id"], [note], usage=choice.usage, op="run")
            return {"next": choice.name, "why": choice.reason, "fallback": choice.fallback, "session_id": info.id}

        picked: dict[str, Any] = await ctx.effect(f"select:{turns}", select, EffectClass.IDEMPOTENT)
        await ctx.progress(f"team: next is {picked['next']} ({picked['why']})")
        return {**state, **picked}


WORKFLOWS = [Team]
