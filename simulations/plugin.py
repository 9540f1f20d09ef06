"""This project's ``vfl.plugins`` entry point: registers the built-in strategies and datasets and
the run backend (``simulations.cli.runner``) that ``vfl.run`` drives. Declared in pyproject.toml."""

from __future__ import annotations


def register() -> None:
    """Import what registers itself and hand ``vfl`` the runner (idempotent)."""
    import parties.defenses  # noqa: F401  (registers the built-in defenses)
    import strategies  # noqa: F401  (registers the built-in strategies)
    from simulations.cli import runner
    from simulations.data import registry  # noqa: F401  (registers the built-in datasets)
    from vfl.core.plugins import BACKENDS, EXPORTS

    if "default" not in BACKENDS:
        BACKENDS.add("default", runner, "simulations.cli.runner: config files, run directories, plots")
    if "VerticalStrategy" not in EXPORTS:  # what docs/writing-a-strategy.md imports from vfl
        from parties.vertical import wire as vertical_wire
        from strategies.base.vertical import VerticalStrategy

        EXPORTS.add("VerticalStrategy", VerticalStrategy, "the base of a vertical strategy (strategies/base/vertical.py)")
        EXPORTS.add("vertical_wire", vertical_wire, "the vertical step's names on the wire (parties/vertical/wire.py)")
