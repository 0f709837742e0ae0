"""The test oracle for recall scores: rank-bm25's BM25Okapi given the IDF our stores use.

rank-bm25 computes Okapi BM25 from its own term counts, document lengths and average length; we
keep all of that and replace only its IDF (``ln((N - df + 0.5) / (df + 0.5))``, floored to
``0.25 * mean IDF`` where negative) by Lucene's ``ln(1 + (N - df + 0.5) / (df + 0.5))``, the one
``runtime.memory.store`` documents. So the oracle is independent of our code in everything but
the IDF formula, which is the one thing we chose to differ.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from rank_bm25 import BM25Okapi


class LuceneIdfBM25(BM25Okapi):  # type: ignore[misc]
    """BM25Okapi (k1=1.2, b=0.75) with Lucene's always-positive IDF."""

    def __init__(self, corpus: list[list[str]]) -> None:
        super().__init__(corpus, k1=1.2, b=0.75)

    def _calc_idf(self, nd: Mapping[str, int]) -> None:
        for word, df in nd.items():
            self.idf[word] = math.log(1 + (self.corpus_size - df + 0.5) / (df + 0.5))
