"""Can the strategy train on this data? The one driver-side check of the task and of missing values.

A dataset is a classification or a regression task (``Dataset.is_regression``: metric rmse) and its
tabular features may hold NaN (``Dataset.num_missing``). A strategy says what it trains on with two
class attributes, ``Strategy.supports_regression`` and ``Strategy.supports_missing`` (both false
by default: the neural strategies are classifiers and need every feature). ``check_data_support``
runs before the strategy's own ``prepare`` (``simulations/cli/runner.py``'s pre-flight), so a
mismatch is one ``ConfigError`` naming the dataset and the strategies that would take it, before
any node exists or any file is written.

With per-party files the driver opens no file: the task comes from ``data.labels.task``, and a missing
cell is refused by the party that reads it unless the strategy opts in (``party_table(allow_missing=)``).
"""

from __future__ import annotations

from vfl.core.errors import ConfigError
from vfl.data.dataset import DataSource, KeyedDataSource
from vfl.engine.strategy import STRATEGIES, Strategy


def strategies_with(flag: str) -> list[str]:
    """The registered strategies whose class attribute ``flag`` is true (sorted names)."""
    return sorted(n for n in STRATEGIES.names() if getattr(STRATEGIES.get(n), flag, False))


def _listed(flag: str) -> str:
    return ", ".join(strategies_with(flag)) or "none registered"


def check_data_support(strategy: type[Strategy], data: DataSource, *, dataset: str) -> None:
    """Refuse a regression task for a strategy without ``supports_regression`` and NaN features for
    one without ``supports_missing``: one ``ConfigError`` (key ``strategy``) naming the dataset."""
    if isinstance(data, KeyedDataSource):
        regression, metric, missing = data.is_regression, "rmse", 0  # NaN cells: each party checks its own file
    else:
        ds = data.dataset()  # cached: the strategy's prepare reads the same object next
        regression, metric, missing = ds.is_regression, ds.metric, ds.num_missing
    if regression and not strategy.supports_regression:
        raise ConfigError("strategy", f"{strategy.name!r} trains classifiers, but dataset {dataset!r} is a regression "
                          f"task (metric {metric}); strategies that support regression: {_listed('supports_regression')}")
    if missing and not strategy.supports_missing:
        raise ConfigError("strategy", f"{strategy.name!r} cannot train on missing values: dataset {dataset!r} has "
                          f"{missing} missing feature values (NaN); impute them or use a strategy that handles "
                          f"missing values ({_listed('supports_missing')})")
