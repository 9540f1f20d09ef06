"""The docs' measured numbers, generated from the benchmarks' JSON kept in ``docs/measurements/``.

    python -m simulations.docs_numbers            # rewrite every generated block of README.md and docs/*.md
    python -m simulations.docs_numbers --check    # list the blocks whose text is not what the JSON gives (exit 1)
    make docs-numbers                             # the first

A generated number sits between two HTML comments (invisible on GitHub), a block on lines of its own or a
value inside a sentence::

    <!-- numbers: peers.table -->
    | system | transport | ...
    <!-- /numbers -->
    ... 9.6 ms ... written as <!-- n: peers.step_ms.vfl.ray.5 -->9.6<!-- /n -->

The name before the first dot is the JSON file (``docs/measurements/peers.json``), the rest picks a
renderer of ``simulations/docs_numbers/render.py``. A new measurement: run the benchmark, copy its JSON
over the file in ``docs/measurements/`` (they are small), run the command, commit both.
``tests/unit/project/test_docs_numbers.py`` fails when a doc's number is not the JSON's.
"""

from simulations.docs_numbers.blocks import ROOT, Mismatch, check, regenerate

__all__ = ["ROOT", "Mismatch", "check", "regenerate"]
