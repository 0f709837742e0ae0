"""Model providers behind one protocol: openai, anthropic, sampling (the MCP client's model), scripted.

The vendor SDKs take seconds to import, so ``OpenAIProvider`` and ``AnthropicProvider`` are loaded on
first use: importing the runtime (a CLI call, a stdio server start) does not pay for them.
"""

from typing import TYPE_CHECKING, Any

from runtime.providers.base import (
    ModelRequest,
    ModelResponse,
    Provider,
    ProviderConfigError,
    ProviderError,
    TokenBudget,
    TokenBudgetExceeded,
    ToolSpec,
)
from runtime.providers.config import PROVIDER_NAMES, configuration_problem, load_provider, read_config
from runtime.providers.registry import ProviderRegistry
from runtime.providers.retry import RetryPolicy
from runtime.providers.sampling import NoSamplingClient, SamplingCallback, SamplingProvider
from runtime.providers.scripted import ScriptedProvider

if TYPE_CHECKING:
    from runtime.providers.anthropic_provider import AnthropicProvider
    from runtime.providers.openai_provider import OpenAIProvider


def __getattr__(name: str) -> Any:
    if name == "OpenAIProvider":
        from runtime.providers.openai_provider import OpenAIProvider

        return OpenAIProvider
    if name == "AnthropicProvider":
        from runtime.providers.anthropic_provider import AnthropicProvider

        return AnthropicProvider
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "PROVIDER_NAMES",
    "AnthropicProvider",
    "ModelRequest",
    "ModelResponse",
    "NoSamplingClient",
    "OpenAIProvider",
    "Provider",
    "ProviderConfigError",
    "ProviderError",
    "ProviderRegistry",
    "RetryPolicy",
    "SamplingCallback",
    "SamplingProvider",
    "ScriptedProvider",
    "TokenBudget",
    "TokenBudgetExceeded",
    "ToolSpec",
    "configuration_problem",
    "load_provider",
    "read_config",
]
