"""Model providers behind one protocol: openai, anthropic, sampling (the MCP client's model), scripted.

The vendor SDKs take seconds to import, so ``OpenAIProvider`` and ``AnthropicProvider`` are loaded on
first use: importing the runtime (a CLI call, a stdio server start) does not pay for them.
Every other name is imported on first use too (``runtime.lazy``).
"""

from typing import TYPE_CHECKING

from runtime.lazy import lazy_exports

if TYPE_CHECKING:
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
    from runtime.providers.config import PROVIDER_NAMES, configuration_problem, load_provider, read_config
    from runtime.providers.openai_provider import OpenAIProvider
    from runtime.providers.registry import ProviderRegistry
    from runtime.providers.retry import RetryPolicy
    from runtime.providers.sampling import NoSamplingClient, SamplingCallback, SamplingProvider
    from runtime.providers.scripted import ScriptedProvider

_EXPORTS = {
    "AnthropicProvider": "runtime.providers.anthropic_provider",
    "ModelRequest": "runtime.providers.base",
    "ModelResponse": "runtime.providers.base",
    "NoSamplingClient": "runtime.providers.sampling",
    "OpenAIProvider": "runtime.providers.openai_provider",
    "PROVIDER_NAMES": "runtime.providers.config",
    "Provider": "runtime.providers.base",
    "ProviderConfigError": "runtime.providers.base",
    "ProviderError": "runtime.providers.base",
    "ProviderRegistry": "runtime.providers.registry",
    "RetryPolicy": "runtime.providers.retry",
    "SamplingCallback": "runtime.providers.sampling",
    "SamplingProvider": "runtime.providers.sampling",
    "ScriptedProvider": "runtime.providers.scripted",
    "TokenBudget": "runtime.providers.base",
    "TokenBudgetExceeded": "runtime.providers.base",
    "ToolSpec": "runtime.providers.base",
    "configuration_problem": "runtime.providers.config",
    "load_provider": "runtime.providers.config",
    "read_config": "runtime.providers.config",
}
__getattr__ = lazy_exports(__name__, _EXPORTS)

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
