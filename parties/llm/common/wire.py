"""Wire names both split-LLM protocols use (the driver's control kinds and the metrics record).

Each protocol's own vocabulary lives in ``parties/llm/p3eft/wire.py`` and ``parties/llm/sap/wire.py``,
which re-export these, so a node or strategy imports every name it needs from its protocol's module.
"""

from __future__ import annotations

# driver -> node control kinds (not part of the parties' protocol; counted on the ledger all the same)
TRAIN_STEP = "train.step"
EVAL_STEP = "evaluate.step"
QUERY_METRICS = "query.metrics"

# records
STEP = "step"  # config record: which step a message belongs to
METRICS = "metrics"  # metric record of a query.metrics reply
