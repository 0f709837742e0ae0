"""Model providers behind one protocol: openai, anthropic, sampling (the MCP client's model), scripted.

The vendor SDKs take seconds to import, so ``OpenAIProvider`` and ``AnthropicProvider`` are loaded on
first use: importing the runtime (a CLI call, a stdio server start) does not pay for them.
Every other name is imported on first use too (``runtime.lazy``).
"""

from typing import TYPE_CHECKING

from runtime.lazy import lazy_namespace

if TYPE_CHECKING:  # the public names, one import each: lazy_namespace reads them (see runtime.lazy)
    from runtime.providers.anthropic_provider import AnthropicProvider as AnthropicProvider
    from runtime.providers.base import ModelRequest as ModelRequest
    from runtime.providers.base import ModelResponse as ModelResponse
    from runtime.providers.base import Provider as Provider
    from runtime.providers.base import ProviderConfigError as ProviderConfigError
    from runtime.providers.base import ProviderError as ProviderError
    from runtime.providers.base import TokenBudget as TokenBudget
    from runtime.providers.base import TokenBudgetExceeded as TokenBudgetExceeded
    from runtime.providers.base import ToolSpec as ToolSpec
    from runtime.providers.config import PROVIDER_NAMES as PROVIDER_NAMES
    from runtime.providers.config import configuration_problem as configuration_problem
    from runtime.providers.config import load_provider as load_provider
    from runtime.providers.config import read_config as read_config
    from runtime.providers.openai_provider import OpenAIProvider as OpenAIProvider
    from runtime.providers.registry import ProviderRegistry as ProviderRegistry
    from runtime.providers.retry import RetryPolicy as RetryPolicy
    from runtime.providers.sampling import NoSamplingClient as NoSamplingClient
    from runtime.providers.sampling import SamplingCallback as SamplingCallback
    from runtime.providers.sampling import SamplingProvider as SamplingProvider
    from runtime.providers.scripted import ScriptedProvider as ScriptedProvider

__getattr__, __dir__, __all__ = lazy_namespace(__name__, __file__)
