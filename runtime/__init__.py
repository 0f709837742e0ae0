"""The rath-mcp runtime: sessions, durable workflows, agents, sandboxes and memory. Knows nothing of MCP.

Every name is imported on first use (``runtime.lazy``): ``from runtime import Runtime`` loads the
store and the durable engine, not the agent stack, the sandboxes or the model providers.
"""

from typing import TYPE_CHECKING

from runtime.lazy import lazy_namespace

if TYPE_CHECKING:  # the public names, one import each: lazy_namespace reads them (see runtime.lazy)
    from runtime.durable import Effect as Effect
    from runtime.durable import Event as Event
    from runtime.durable import Interrupt as Interrupt
    from runtime.durable import Run as Run
    from runtime.durable import RunService as RunService
    from runtime.durable import WorkflowRegistry as WorkflowRegistry
    from runtime.durable import run_worker as run_worker
    from runtime.errors import ConflictError as ConflictError
    from runtime.errors import InvalidInputError as InvalidInputError
    from runtime.errors import NotFoundError as NotFoundError
    from runtime.errors import RathError as RathError
    from runtime.errors import RunFailure as RunFailure
    from runtime.errors import UsageError as UsageError
    from runtime.flow import Agent as Agent
    from runtime.flow import AgentResult as AgentResult
    from runtime.flow import Choice as Choice
    from runtime.flow import Compressor as Compressor
    from runtime.flow import CompressResult as CompressResult
    from runtime.flow import FlowToolCall as FlowToolCall
    from runtime.flow import MCPServerSpec as MCPServerSpec
    from runtime.flow import MCPToolServer as MCPToolServer
    from runtime.flow import MemoryOptions as MemoryOptions
    from runtime.flow import Selection as Selection
    from runtime.flow import Selector as Selector
    from runtime.flow import sandbox_tools as sandbox_tools
    from runtime.flow.workflow import Decision as Decision
    from runtime.flow.workflow import EffectClass as EffectClass
    from runtime.flow.workflow import RetryPolicy as RetryPolicy
    from runtime.flow.workflow import StepContext as StepContext
    from runtime.flow.workflow import SyncStepContext as SyncStepContext
    from runtime.flow.workflow import Workflow as Workflow
    from runtime.flow.workflow import router as router
    from runtime.flow.workflow import step as step
    from runtime.memory import CommitResult as CommitResult
    from runtime.memory import Extractor as Extractor
    from runtime.memory import HeuristicExtractor as HeuristicExtractor
    from runtime.memory import MemoryHit as MemoryHit
    from runtime.memory import MemoryItem as MemoryItem
    from runtime.memory import MemoryService as MemoryService
    from runtime.providers import ModelRequest as ModelRequest
    from runtime.providers import ModelResponse as ModelResponse
    from runtime.providers import Provider as Provider
    from runtime.providers import ProviderError as ProviderError
    from runtime.providers import SamplingProvider as SamplingProvider
    from runtime.providers import ScriptedProvider as ScriptedProvider
    from runtime.providers import ToolSpec as ToolSpec
    from runtime.providers import load_provider as load_provider
    from runtime.runtime import Runtime as Runtime
    from runtime.runtime import resolve_home as resolve_home
    from runtime.sandbox import Capabilities as Capabilities
    from runtime.sandbox import CommandResult as CommandResult
    from runtime.sandbox import FileEntry as FileEntry
    from runtime.sandbox import Sandbox as Sandbox
    from runtime.sandbox import SandboxError as SandboxError
    from runtime.sandbox.registry import SandboxRegistry as SandboxRegistry
    from runtime.sessions import Chunk as Chunk
    from runtime.sessions import LineageGraph as LineageGraph
    from runtime.sessions import Placement as Placement
    from runtime.sessions import Session as Session
    from runtime.sessions import SessionInfo as SessionInfo
    from runtime.sessions import ToolCall as ToolCall
    from runtime.sessions import Usage as Usage

__getattr__, __dir__, __all__ = lazy_namespace(__name__, __file__)
