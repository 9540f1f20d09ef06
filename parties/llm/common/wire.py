"""Wire names both split-LLM protocols use (the driver's control kinds and two records).

Each protocol's vocabulary (``parties/llm/p3eft/wire.py``, ``parties/llm/sap/wire.py``) extends these
two classes, so a node or strategy reads every name from its own protocol's ``Kind`` and ``Record``
(as Flower's ``secaggplus_constants`` groups ``Stage`` and ``RecordKey``).
"""

from __future__ import annotations


class Kind:
    """Message kinds (``metadata.message_type``) of driver control messages."""

    TRAIN_STEP = "train.step"
    EVAL_STEP = "evaluate.step"
    QUERY_METRICS = "query.metrics"  # the label owner's accuracy and loss


class Record:
    """Record names inside a message's content."""

    STEP = "step"  # config record: which step a message belongs to
    METRICS = "metrics"  # metric record of a query.metrics reply
    STEP_LOSS = "step_loss"  # array record of a training query.metrics reply: each step's loss since the last query
