"""A model's text as it is written, passed on to a client waiting on the run.

A running agent step records each piece of its model's text as a ``step.text`` event (the
runtime's ``StepContext.text``, fed by the providers' ``on_delta``). Events live in the store, so a
waiter in any server process on it sees them: every change a run watch reports that advanced the
run's event log is read for new pieces. The waiting tool (``run_wait``, ``run_start``,
``delegate``) or ``tasks/result`` sends each piece on as a progress notification (its message is
the text) and an ``info`` log message (``{"run_id", "text"}``) for clients that asked for logs.
"""

from __future__ import annotations

from typing import Final

from runtime import Runtime
from runtime.durable.models import Run

TEXT_EVENT: Final = "step.text"
_PAGE = 1000


class TextRelay:
    """The pieces of one run's model text that one waiter has not been given yet."""

    def __init__(self, rt: Runtime, run_id: str) -> None:
        self.rt = rt
        self.run_id = run_id
        self.after: int | None = None  # the last event seq looked at; None before the first look

    async def fresh(self, run: Run) -> list[str]:
        """Text written since the last look (the first look sets where the waiter starts: nothing before it)."""
        if self.after is None:
            self.after = run.last_seq
            return []
        pieces: list[str] = []
        while run.last_seq > self.after:
            events = await self.rt.runs.events(self.run_id, self.after, _PAGE)
            if not events:
                break
            self.after = events[-1].seq
            pieces += [str(e.data.get("text", "")) for e in events if e.type == TEXT_EVENT]
        return [p for p in pieces if p]
