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


def build() -> dict[str, Any]:
    """The catalog, from the live registries (imports every registered strategy, defense and dataset)."""
    import parties.defenses  # noqa: F401  (registers the built-in defenses)
    import strategies  # noqa: F401  (registers the built-in strategies)
    from simulations.data.registry import DATASETS, is_bundled
    from vfl.config.fields import help_table
    from vfl.engine.strategy import STRATEGIES
    from vfl.privacy.defenses import DEFENSES, help_rows

    return {
        "strategies": {n: {"help": STRATEGIES.help(n), "headline": list(STRATEGIES.get(n).headline),
                           "params": [list(r) for r in help_table(STRATEGIES.get(n).Params, "params")]}
                       for n in STRATEGIES.names()},
        "defenses": {n: {"help": DEFENSES.help(n), "headline": list(DEFENSES.get(n).headline)}
                     for n in DEFENSES.names()},
        "defense_rows": [list(r) for r in help_rows()],
        "datasets": {n: {"help": DATASETS.help(n), "bundled": is_bundled(n)} for n in DATASETS.names()},
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
    path.write_text(json.dumps(build(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


if __name__ == "__main__":
    print(f"wrote {write()}")
