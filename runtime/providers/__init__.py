"""Model providers behind one protocol: openai, anthropic, sampling (the MCP client's model), scripted."""

from runtime.providers.anthropic_provider import AnthropicProvider
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
from runtime.providers.config import PROVIDER_NAMES, load_provider, read_config
from runtime.providers.openai_provider import OpenAIProvider
from runtime.providers.registry import ProviderRegistry
from runtime.providers.retry import RetryPolicy
from runtime.providers.sampling import SamplingCallback, SamplingProvider
from runtime.providers.scripted import ScriptedProvider

__all__ = [
    "PROVIDER_NAMES",
    "AnthropicProvider",
    "ModelRequest",
    "ModelResponse",
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
    "load_provider",
    "read_config",
]
