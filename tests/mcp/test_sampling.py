"""The ``sampling`` provider: a workflow configured with it uses the connected client's own model."""

from __future__ import annotations

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
from runtime import Runtime
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
        assert out["chunks"][-1] == {"kind": "assistant", "content": "Four."}
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
    assert queue.take() == {}
