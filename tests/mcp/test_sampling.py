"""The ``sampling`` provider: a workflow configured with it uses the connected client's own model."""

from __future__ import annotations

import anyio
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.server import MCPServer
from mcp_types import (
    CreateMessageRequestParams,
    CreateMessageResult,
    CreateMessageResultWithTools,
    ErrorData,
    SamplingCapability,
    SamplingToolsCapability,
    TextContent,
    ToolResultContent,
    ToolUseContent,
)

from rath_mcp.sampling_queue import SamplingQueue
from runtime import Runtime, StepContext, Workflow, step
from runtime.providers import ModelRequest, ProviderError
from runtime.sessions import Chunk
from tests.mcp.conftest import call

pytestmark = pytest.mark.anyio


class ClientModel:
    """The client's model: scripted answers, and a record of what it was asked."""

    def __init__(self, *answers: CreateMessageResult | CreateMessageResultWithTools) -> None:
        self.answers = list(answers)
        self.requests: list[CreateMessageRequestParams] = []

    async def __call__(
        self, context: ClientRequestContext, params: CreateMessageRequestParams
    ) -> CreateMessageResult | CreateMessageResultWithTools | ErrorData:
        self.requests.append(params)
        return self.answers.pop(0)


def say(text: str) -> CreateMessageResult:
    return CreateMessageResult(role="assistant", content=TextContent(type="text", text=text), model="client-model")


async def test_an_agent_run_on_the_sampling_provider_is_answered_by_the_clients_model(
    server: MCPServer, era: str
) -> None:
    model = ClientModel(say("Four."))
    async with Client(server, mode=era, sampling_callback=model) as client:
        inp = {"provider": "sampling", "memory": False}
        run = await call(client, "run_start", workflow="agent", message="What is 2+2?", input=inp, wait_s=20)
        assert run["status"] == "succeeded", run["error"]
        out = await call(client, "session_get", session_id=run["output_session_id"])
        assert out["chunks"][-1] == {"kind": "assistant", "content": "Four.", "trust": "model"}
    asked = model.requests[0]
    assert asked.tools is None  # this client did not declare sampling.tools
    assert asked.system_prompt and "sandbox" in asked.system_prompt
    assert any(
        isinstance(b, TextContent) and b.text == "What is 2+2?" for m in asked.messages for b in m.content_as_list
    )


async def test_a_client_with_sampling_tools_drives_the_agents_tools(server: MCPServer, rt: Runtime, era: str) -> None:
    write = ToolUseContent(type="tool_use", id="call_1", name="write_file", input={"path": "a.txt", "content": "hi"})
    model = ClientModel(
        CreateMessageResultWithTools(role="assistant", content=[write], model="client-model", stop_reason="toolUse"),
        say("Wrote a.txt."),
    )
    caps = SamplingCapability(tools=SamplingToolsCapability())
    async with Client(server, mode=era, sampling_callback=model, sampling_capabilities=caps) as client:
        sid = (await call(client, "session_create", message="Write hi to a.txt", workspace="samp"))["session_id"]
        inp = {"provider": "sampling", "memory": False}
        run = await call(client, "run_start", workflow="agent", session_id=sid, input=inp, wait_s=20)
        assert run["status"] == "succeeded", run["error"]
    assert model.requests[0].tools and "write_file" in {t.name for t in model.requests[0].tools}
    second = [b for m in model.requests[1].messages for b in m.content_as_list]
    assert any(isinstance(b, ToolUseContent) and b.id == "call_1" for b in second)
    assert any(isinstance(b, ToolResultContent) and b.tool_use_id == "call_1" for b in second)
    sandbox = await rt.sandboxes.get(rt.sandboxes.placement("samp"))
    assert await sandbox.read_file("a.txt") == b"hi"


async def test_without_a_sampling_client_the_run_fails_saying_what_to_connect(client: Client) -> None:
    inp = {"provider": "sampling", "memory": False}
    run = await call(client, "run_start", workflow="agent", message="hi", input=inp, wait_s=20)
    assert run["status"] == "failed" and "sampling" in run["error"]


async def test_a_disconnected_sampling_client_is_forgotten(server: MCPServer) -> None:
    async with Client(server, mode="legacy", sampling_callback=ClientModel()) as gone:
        await call(gone, "session_list")
    async with Client(server, mode="2026-07-28") as client:
        inp = {"provider": "sampling", "memory": False}
        run = await call(client, "run_start", workflow="agent", message="hi", input=inp, wait_s=20)
        assert run["status"] == "failed" and "no connected MCP client offers sampling" in run["error"]


async def test_a_2026_client_answers_model_calls_while_it_waits_later_with_run_wait(server: MCPServer) -> None:
    model = ClientModel(say("Later answer."))
    async with Client(server, mode="2026-07-28", sampling_callback=model) as client:
        inp = {"provider": "sampling", "memory": False, "tools": False}
        started = await call(client, "run_start", workflow="agent", message="hi", input=inp)
        assert started["status"] in ("queued", "running")
        done = await call(client, "run_wait", run_id=started["run_id"], timeout_s=20)
        assert done["status"] == "succeeded", done["error"]
        out = await call(client, "session_get", session_id=done["output_session_id"])
        assert out["chunks"][-1]["content"] == "Later answer." and len(model.requests) == 1


async def test_a_queued_model_call_nobody_answers_fails_with_what_to_do() -> None:
    queue = SamplingQueue(answer_wait_s=0.1)
    with pytest.raises(ProviderError, match="no client answered"):
        await queue.ask(ModelRequest(messages=[Chunk(kind="user", content="hi")]))
    assert queue.take("run_x") == {}


async def output_of(client: Client, run: dict[str, object]) -> str:
    assert run["status"] == "succeeded", run["error"]
    out = await call(client, "session_get", session_id=run["output_session_id"])
    return str(out["chunks"][-1]["content"])


class AskTheClient(Workflow):
    """Waits for the test's go, then asks the ``sampling`` provider once."""

    name = "ask_the_client"

    def __init__(self) -> None:
        self.entered, self.go = anyio.Event(), anyio.Event()

    @step(entry=True)
    async def ask(self, state: dict[str, object], ctx: StepContext) -> dict[str, object]:
        self.entered.set()
        await self.go.wait()
        provider = ctx.runtime.providers.get("sampling")
        response = await provider.complete(ModelRequest(messages=[Chunk(kind="user", content="secret plans")]))
        return {"answer": response.content}


async def test_a_runs_model_calls_go_only_to_the_client_waiting_on_it(server: MCPServer, rt: Runtime) -> None:
    """Another client that spoke last must not be handed this client's conversation."""
    flow = AskTheClient()
    rt.workflows.register(flow)
    mine, theirs = ClientModel(say("from mine")), ClientModel(say("from theirs"))
    async with (
        Client(server, mode="legacy", sampling_callback=mine) as client,
        Client(server, mode="legacy", sampling_callback=theirs) as other,
    ):
        runs: list[dict[str, object]] = []
        waiting = anyio.Event()

        async def progressed(progress: float, total: float | None, message: str | None) -> None:
            waiting.set()  # the server reports progress only once run_start is waiting on the run

        async def start() -> None:
            result = await client.call_tool("run_start", {"workflow": "ask_the_client", "wait_s": 20}, None, progressed)
            assert not result.is_error and result.structured_content is not None
            runs.append(result.structured_content)

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(start)
                # Both, in either order: the step holds at its gate, and this client waits on the run (so
                # the model call is made while it waits, not in the moment between starting and waiting).
                await flow.entered.wait()
                await waiting.wait()
                await call(other, "session_list")  # the other client is now the last one heard from
                flow.go.set()
        run = await rt.runs.get(str(runs[0]["run_id"]))
    assert run.status == "succeeded", run.error
    assert run.state["answer"] == "from mine"
    assert len(mine.requests) == 1 and theirs.requests == []


async def test_concurrent_2026_clients_each_answer_only_their_own_runs(server: MCPServer) -> None:
    models = {name: ClientModel(say(f"answered by {name}")) for name in ("a", "b")}
    inp = {"provider": "sampling", "memory": False, "tools": False}
    outputs: dict[str, str] = {}

    async def use(name: str) -> None:
        async with Client(server, mode="2026-07-28", sampling_callback=models[name]) as client:
            run = await call(client, "run_start", workflow="agent", message=f"task of {name}", input=inp, wait_s=20)
            outputs[name] = await output_of(client, run)

    with anyio.fail_after(40):
        async with anyio.create_task_group() as tg:
            tg.start_soon(use, "a")
            tg.start_soon(use, "b")
    assert outputs == {"a": "answered by a", "b": "answered by b"}
    for name, model in models.items():
        asked = [b.text for m in model.requests for b in m.messages[-1].content_as_list if isinstance(b, TextContent)]
        assert asked == [f"task of {name}"]


async def test_with_several_sampling_clients_and_nobody_waiting_the_run_fails_saying_whom_to_wait(
    server: MCPServer, rt: Runtime
) -> None:
    inp = {"provider": "sampling", "memory": False, "tools": False}
    first, second = ClientModel(say("x")), ClientModel(say("y"))
    async with (
        Client(server, mode="legacy", sampling_callback=first) as client,
        Client(server, mode="legacy", sampling_callback=second) as other,
    ):
        await call(other, "session_list")
        started = await call(client, "run_start", workflow="agent", message="hi", input=inp)
        # Waiting in the runtime, not through a client: no client claims the run's model calls.
        run = (await rt.runs.wait(started["run_id"], timeout_s=20)).summary()
    assert run["status"] == "failed" and "none is waiting on run" in str(run["error"]), run
    assert first.requests == [] and second.requests == []
