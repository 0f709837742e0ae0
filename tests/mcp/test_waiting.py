"""Long work never blocks a host: bounded waits with progress, asking humans through the client.

Interrupts reach a person through elicitation on handshake-era connections and through
``InputRequiredResult`` on 2026-07-28 (the SDK client answers with the same callback and retries).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.server import MCPServer
from mcp_types import ElicitRequestParams, ElicitResult, ErrorData

from rath_mcp.server import build_server
from rath_mcp.waiting import MAX_WAIT_S, cap
from runtime import Runtime, StepContext, Workflow, step
from tests.mcp.conftest import call

pytestmark = pytest.mark.anyio


class Human:
    """An elicitation callback standing in for the person at the client: answers from a script."""

    def __init__(self, *answers: ElicitResult) -> None:
        self.answers = list(answers)
        self.asked: list[ElicitRequestParams] = []

    async def __call__(self, context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult | ErrorData:
        self.asked.append(params)
        return self.answers.pop(0)


def accept(**content: Any) -> ElicitResult:
    return ElicitResult(action="accept", content=content)


async def test_an_interrupt_is_asked_through_the_client_and_the_answer_becomes_the_decision(
    server: MCPServer, era: str
) -> None:
    human = Human(accept(decision="approve", reason="looks good"))
    async with Client(server, mode=era, elicitation_callback=human) as client:
        run = await call(client, "run_start", workflow="approval", input={"draft": "Release notes"}, wait_s=20)
        assert run["status"] == "succeeded" and run["pending_interrupts"] == []
        assert len(human.asked) == 1 and "Release notes" in human.asked[0].message
        schema = human.asked[0].requested_schema  # type: ignore[union-attr]
        assert schema["properties"]["decision"]["enum"] == ["approve", "reject"]
        events = (await call(client, "run_events", run_id=run["run_id"]))["events"]
        decided = [e for e in events if e["type"] == "interrupt.decided"]
        assert decided[0]["data"]["action"] == "approve"
        assert decided[0]["data"]["actor"].startswith("mcp-elicitation")


async def test_declining_the_form_rejects_the_interrupt(server: MCPServer, era: str) -> None:
    async with Client(server, mode=era, elicitation_callback=Human(ElicitResult(action="decline"))) as client:
        run = await call(client, "run_start", workflow="approval", input={"draft": "d"}, wait_s=20)
        assert run["status"] == "succeeded"
        state = await client.read_resource(f"rath://runs/{run['run_id']}")
        assert '"outcome": "rejected"' in state.contents[0].text  # type: ignore[union-attr]


async def test_dismissing_the_form_leaves_the_interrupt_pending_for_interrupt_resolve(
    server: MCPServer, era: str
) -> None:
    human = Human(ElicitResult(action="cancel"))
    async with Client(server, mode=era, elicitation_callback=human) as client:
        run = await call(client, "run_start", workflow="approval", input={"draft": "d"}, wait_s=20)
        assert run["status"] == "waiting" and len(run["pending_interrupts"]) == 1 and len(human.asked) == 1
        iid = run["pending_interrupts"][0]["interrupt_id"]
        await call(client, "interrupt_resolve", interrupt_id=iid, action="approve")
        assert (await call(client, "run_wait", run_id=run["run_id"], timeout_s=20))["status"] == "succeeded"


async def test_a_client_without_elicitation_gets_the_pending_interrupt_in_the_result(client: Client) -> None:
    run = await call(client, "run_start", workflow="approval", input={"draft": "d"}, wait_s=20)
    assert run["status"] == "waiting" and run["pending_interrupts"][0]["kind"] == "approval"


async def test_wait_s_zero_never_asks_the_human(server: MCPServer, era: str) -> None:
    human = Human()
    async with Client(server, mode=era, elicitation_callback=human) as client:
        run = await call(client, "run_start", workflow="approval", input={"draft": "d"})
        waited = await call(client, "run_wait", run_id=run["run_id"], timeout_s=0)
        assert waited["status"] in ("queued", "running", "waiting") and human.asked == []


async def test_delegate_asks_the_human_and_returns_the_answer_once_approved(server: MCPServer, era: str) -> None:
    human = Human(accept(decision="approve"))
    async with Client(server, mode=era, elicitation_callback=human) as client:
        result = await call(client, "delegate", task="a task for approval", workflow="approval", wait_s=20)
        assert result["status"] == "succeeded" and result["pending_interrupts"] == []
        assert result["answer"] == "a task for approval" and len(human.asked) == 1


class AskName(Workflow):
    """Ask a person for a name (an input interrupt whose schema is already a flat form)."""

    name = "ask_name"

    @step(entry=True)
    async def ask(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
        decision = await ctx.interrupt("input", prompt="Your name?", schema=schema)
        return {**state, "name": decision.value["name"]}


class ReviewCount(Workflow):
    """Ask a reviewer to check a number (a review interrupt expecting an integer)."""

    name = "review_count"

    @step(entry=True)
    async def review(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        decision = await ctx.interrupt("review", prompt="Is 41 right?", schema={"type": "integer"})
        return {**state, "action": decision.action, "count": decision.value if decision.action == "edit" else 41}


async def _final_state(client: Client, run_id: str) -> dict[str, Any]:
    body = (await client.read_resource(f"rath://runs/{run_id}")).contents[0]
    state: dict[str, Any] = json.loads(body.text)["state"]  # type: ignore[union-attr]
    return state


async def test_an_input_interrupt_with_a_flat_schema_is_asked_with_that_schema(rt: Runtime, era: str) -> None:
    rt.workflows.register(AskName)
    human = Human(accept(name="Ada"))
    async with Client(build_server(rt), mode=era, elicitation_callback=human) as client:
        run = await call(client, "run_start", workflow="ask_name", wait_s=20)
        assert run["status"] == "succeeded"
        assert human.asked[0].requested_schema["properties"] == {"name": {"type": "string"}}  # type: ignore[union-attr]
        assert (await _final_state(client, run["run_id"]))["name"] == "Ada"


async def test_a_review_edit_through_the_form_is_parsed_as_the_json_the_schema_expects(rt: Runtime, era: str) -> None:
    rt.workflows.register(ReviewCount)
    human = Human(accept(decision="edit", value="42", reason="off by one"))
    async with Client(build_server(rt), mode=era, elicitation_callback=human) as client:
        run = await call(client, "run_start", workflow="review_count", wait_s=20)
        assert run["status"] == "succeeded"
        assert await _final_state(client, run["run_id"]) == {"action": "edit", "count": 42}


@pytest.fixture
async def idle_server(tmp_path: Path) -> AsyncIterator[MCPServer]:
    """A server whose runtime runs no workers: every run stays queued, so waits run to their budget."""
    async with Runtime.open(tmp_path / "idle", workers=0) as rt:
        yield build_server(rt, heartbeat_s=0.05)


class HandClock:
    """A clock only the test moves: a sleeper wakes once the clock has been moved to its time."""

    def __init__(self) -> None:
        self.t = 0.0
        self._moved = anyio.Event()

    def now(self) -> float:
        return self.t

    async def sleep_until(self, when: float) -> None:
        while self.t < when:
            await self._moved.wait()

    def advance(self, seconds: float) -> None:
        self.t += seconds
        moved, self._moved = self._moved, anyio.Event()
        moved.set()


async def test_run_wait_sends_progress_and_returns_the_handle_when_time_runs_out(tmp_path: Path, era: str) -> None:
    clock = HandClock()
    progress_sent, progress_seen = anyio.create_memory_object_stream[tuple[float, float | None, str | None]](100)

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        await progress_sent.send((progress, total, message))

    async with (
        Runtime.open(tmp_path / "idle", workers=0) as rt,  # no workers: the run stays queued
        Client(build_server(rt, heartbeat_s=0.25, clock=clock), mode=era) as client,
    ):
        run = await call(client, "run_start", workflow="echo", message="m")
        results: list[Any] = []
        seen: list[tuple[float, float | None, str | None]] = []
        with anyio.fail_after(20):  # only a hang guard: the wait's own time is the hand clock's
            async with anyio.create_task_group() as tg:

                async def wait() -> None:
                    args = {"run_id": run["run_id"], "timeout_s": 1.0}
                    results.append(await client.call_tool("run_wait", args, progress_callback=on_progress))

                tg.start_soon(wait)
                seen.append(await progress_seen.receive())  # the run as it was on arrival
                for _ in range(3):  # a heartbeat at 0.25, 0.5 and 0.75 s of the 1 s budget
                    clock.advance(0.25)
                    seen.append(await progress_seen.receive())
                assert results == []  # 0.75 s into a 1 s budget the call is still waiting
                clock.advance(0.25)  # the budget runs out
        progress_sent.close()
        with progress_seen:
            seen += [late async for late in progress_seen]  # a last heartbeat may share the final instant
        result = results[0]
        assert result.structured_content is not None
        assert result.structured_content["status"] == "queued" and "run_wait" in result.structured_content["hint"]
    assert [p for p, _, _ in seen][:4] == [0.0, 0.25, 0.5, 0.75]  # seconds waited, strictly rising
    assert all(total == 1.0 for _, total, _ in seen), seen
    assert all(f"run {run['run_id']} is queued" in str(message) for _, _, message in seen)


async def test_cancelling_run_wait_does_not_cancel_the_run_but_run_cancel_does(
    idle_server: MCPServer, era: str
) -> None:
    async with Client(idle_server, mode=era) as client:
        run = await call(client, "run_start", workflow="echo", message="m")
        first_progress = anyio.Event()

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            first_progress.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(
                lambda: client.call_tool(
                    "run_wait", {"run_id": run["run_id"], "timeout_s": 30}, progress_callback=on_progress
                )
            )
            with anyio.fail_after(5):
                await first_progress.wait()
            tg.cancel_scope.cancel()
        assert (await call(client, "run_get", run_id=run["run_id"]))["status"] == "queued"
        assert (await call(client, "run_cancel", run_id=run["run_id"]))["status"] == "cancelled"


def test_wait_budgets_are_capped_under_a_hosts_sixty_second_timeout() -> None:
    assert cap(3600) == MAX_WAIT_S == 50
    assert cap(-1) == 0 and cap(2.5) == 2.5
