"""What users run: the ``vfl`` CLI, configs, datasets, sweeps and benchmarks."""
