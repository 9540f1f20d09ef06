"""What users run: the ``vfl`` CLI, configs, datasets, sweeps and benchmarks."""

# vfl before anything of ours imports flwr: its warnings filter (vfl/__init__.py, cheap: the API is lazy)
# silences flwr's protobuf gencode notices, nine lines on e.g. `python -m simulations.benchmarks.overhead`.
import vfl  # noqa: F401
