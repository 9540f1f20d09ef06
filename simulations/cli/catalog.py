"""What the listing commands print (``vfl strategies``, ``defenses``, ``datasets``, ``config-help``),
answered without importing torch: the registries' names, one-line help, headline keys, options and
whether a dataset ships with an installed package, read from ``catalog.json`` beside this module.

The registries stay the one source: ``build()`` reads them (importing every strategy, defense and
loader: seconds of torch start-up), ``catalog.json`` is its output, and
tests/unit/simulations/test_catalog.py fails when the two differ. After changing a strategy's
summary, params or headline, a defense or a dataset loader, regenerate it:

    python -m simulations.cli.catalog

A third-party ``vfl.plugins`` entry point may register more, so with one installed the listings
import everything and build the catalog live (as slow as before, and complete).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CATALOG = Path(__file__).with_name("catalog.json")


BUILTIN_MODULES = ("vfl.", "parties.", "strategies.", "simulations.data.")  # not benchmarks' audited variants


def _own(obj: Any) -> bool:
    """Registered by this project's built-in modules (not by a plugin, a benchmark or a test)."""
    return str(getattr(obj, "__module__", "")).startswith(BUILTIN_MODULES)


def build(*, builtin_only: bool = False) -> dict[str, Any]:
    """The catalog, from the live registries (imports every registered strategy, defense and dataset);
    ``builtin_only``: only what this project registers (what ``catalog.json`` ships)."""
    import parties.defenses  # noqa: F401  (registers the built-in defenses)
    import strategies  # noqa: F401  (registers the built-in strategies)
    from simulations.data.registry import DATASETS, is_bundled
    from vfl.config.fields import help_table
    from vfl.engine.strategy import STRATEGIES
    from vfl.privacy.defenses import DEFENSES, help_rows

    def keep(registry: Any) -> list[str]:
        return [n for n in registry.names() if not builtin_only or _own(registry.get(n))]

    defenses = keep(DEFENSES)
    return {
        "strategies": {n: {"help": STRATEGIES.help(n), "headline": list(STRATEGIES.get(n).headline),
                           "params": [list(r) for r in help_table(STRATEGIES.get(n).Params, "params")]}
                       for n in keep(STRATEGIES)},
        "defenses": {n: {"help": DEFENSES.help(n), "headline": list(DEFENSES.get(n).headline)} for n in defenses},
        "defense_rows": [list(r) for r in help_rows(defenses)],
        "datasets": {n: {"help": DATASETS.help(n), "bundled": is_bundled(n)} for n in keep(DATASETS)},
    }


def third_party_plugins() -> list[str]:
    """Names of the installed ``vfl.plugins`` entry points other than this project's own."""
    from importlib.metadata import entry_points

    from vfl.core.plugins import BUILTIN_NAME, ENTRY_POINT_GROUP

    return sorted(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name != BUILTIN_NAME)


def current() -> dict[str, Any]:
    """The shipped catalog; built live (plugins loaded) when a third-party plugin is installed."""
    if third_party_plugins():
        from vfl.core.plugins import load_plugins

        load_plugins()  # third-party strategies, defenses and datasets register from their entry points
        return build()
    data: dict[str, Any] = json.loads(CATALOG.read_text(encoding="utf-8"))
    return data


def write(path: Path = CATALOG) -> Path:
    """Regenerate ``catalog.json`` from the registries (built-ins only, whatever plugins are installed)."""
    path.write_text(json.dumps(build(builtin_only=True), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


if __name__ == "__main__":
    print(f"wrote {write()}")
