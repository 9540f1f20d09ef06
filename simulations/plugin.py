"""This project's ``vfl.plugins`` entry point: registers the built-in strategies and datasets and
the run backend (``simulations.cli.runner``) that ``vfl.run`` drives. Declared in pyproject.toml."""

from __future__ import annotations


def register() -> None:
    """Import what registers itself and hand ``vfl`` the runner (idempotent)."""
    import parties.defenses  # noqa: F401  (registers the built-in defenses)
    import strategies  # noqa: F401  (registers the built-in strategies)
    from simulations.cli import runner
    from simulations.data import registry  # noqa: F401  (registers the built-in datasets)
    from vfl.core.plugins import BACKENDS

    if "default" not in BACKENDS:
        BACKENDS.add("default", runner, "simulations.cli.runner: config files, run directories, plots")
