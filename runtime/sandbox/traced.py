"""Sandbox commands as spans: ``sandbox command`` / ``sandbox code LANGUAGE`` with the exit code,
whether it timed out or hit a limit (and which), its duration and whether its output was cut.

``SandboxRegistry`` hands out each opened sandbox inside a ``TracedSandbox`` when tracing is on; the
backends themselves know nothing of it. The command line becomes an attribute only when contents
may be captured (a command may carry a secret); a timeout or a limit hit marks the span failed.
"""

from __future__ import annotations

from typing import Any

from runtime.sandbox.base import CommandResult, Sandbox
from runtime.telemetry import Span, Tracing


class TracedSandbox:
    """``inner`` with ``run_command`` and ``run_code`` in spans; everything else is ``inner``'s."""

    def __init__(self, inner: Sandbox, tracing: Tracing) -> None:
        self.inner = inner
        self._tracing = tracing

    def __getattr__(self, name: str) -> Any:  # backend, workspace, capabilities, files, close, …
        return getattr(self.inner, name)

    def __repr__(self) -> str:
        return f"TracedSandbox({self.inner!r})"

    def _attributes(self) -> dict[str, Any]:
        return {"rath.sandbox.backend": self.inner.backend, "rath.sandbox.workspace": self.inner.workspace}

    async def run_command(
        self,
        command: str | list[str],
        *,
        stdin: bytes | str | None = None,
        env: dict[str, str] | None = None,
        timeout_s: float = 30.0,
        cwd: str = ".",
    ) -> CommandResult:
        with self._tracing.span("sandbox command", attributes=self._attributes()) as span:
            if self._tracing.capture_content:
                span.set("process.command_line", command if isinstance(command, str) else " ".join(command))
            result = await self.inner.run_command(command, stdin=stdin, env=env, timeout_s=timeout_s, cwd=cwd)
            _outcome(span, result)
            return result

    async def run_code(self, code: str, *, language: str = "python", timeout_s: float = 30.0) -> CommandResult:
        attributes = {**self._attributes(), "rath.sandbox.language": language}
        with self._tracing.span(f"sandbox code {language}", attributes=attributes) as span:
            result = await self.inner.run_code(code, language=language, timeout_s=timeout_s)
            _outcome(span, result)
            return result


def _outcome(span: Span, result: CommandResult) -> None:
    span.set_many(
        {
            "process.exit.code": result.exit_code,
            "rath.sandbox.timed_out": result.timed_out,
            "rath.sandbox.limit": result.limit,
            "rath.sandbox.truncated": result.truncated,
            "rath.sandbox.duration_s": result.duration_s,
        }
    )
    if result.timed_out:
        span.fail("timeout")
    elif result.limit:
        span.fail(f"limit.{result.limit}")


def traced(sandbox: Sandbox, tracing: Tracing) -> Sandbox:
    """``sandbox`` with its commands in spans when tracing is on; itself (no cost) when it is off."""
    return TracedSandbox(sandbox, tracing) if tracing.enabled else sandbox
