"""How the durable layer writes JSON (state, events, results): ``dumps``, compact and UTF-8 as is.

``runtime.durable.store`` re-exports it: the stores and the runner write their JSON with it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any


class _CompactJSON:
    """``json.dumps(value, separators=(",", ":"), ensure_ascii=False)``, made cheaper for the values a
    step's commit dumps several of: ``json.dumps`` builds an encoder per call, and so does
    ``JSONEncoder.encode`` (its C encoder, in ``iterencode``); this one keeps its C encoder. The encoder's
    cycle check remembers the containers it is inside of: an encoding that fails part-way may leave some
    behind, so a failure replaces the encoder (a later value reusing such an id is no false "cycle")."""

    def __init__(self) -> None:
        self._python = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
        self._c: Callable[[Any, int], Sequence[str]] | None = self._fresh()

    def _fresh(self) -> Callable[[Any, int], Sequence[str]] | None:
        make = getattr(json.encoder, "c_make_encoder", None)
        if make is None:  # an interpreter without the C accelerator: the plain encoder
            return None
        py = self._python  # the one statement of the options: the C encoder takes them from it
        return make(  # type: ignore[no-any-return]
            {},
            py.default,
            json.encoder.encode_basestring_ascii if py.ensure_ascii else json.encoder.encode_basestring,
            py.indent,
            py.key_separator,
            py.item_separator,
            py.sort_keys,
            py.skipkeys,
            py.allow_nan,
        )

    def __call__(self, value: Any) -> str:
        if self._c is None:
            return self._python.encode(value)
        try:
            return "".join(self._c(value, 0))
        except BaseException:
            self._c = self._fresh()
            raise


#: The durable layer's JSON writer.
dumps = _CompactJSON()
