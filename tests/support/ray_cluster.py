"""Start and stop a private local multi-node Ray cluster for tests (never `ray stop`, which would
kill every Ray on the machine): the benchmark's ``LocalCluster`` terminates only the processes of
its own temp dir and port; here with the tests' argument names."""

from __future__ import annotations

from simulations.benchmarks import two_node

free_port = two_node.free_port


class LocalCluster(two_node.LocalCluster):
    """A head node plus ``workers`` worker nodes on 127.0.0.1, ``cpus_per_node`` CPUs each."""

    def __init__(self, workers: int = 1, cpus_per_node: int = 1) -> None:
        super().__init__(nodes=workers + 1, cpus=cpus_per_node)
        self.workers = workers
