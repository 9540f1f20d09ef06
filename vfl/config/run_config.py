"""The run configuration's sections as frozen dataclasses (``RunConfig`` and the section classes).

Sections mirror the YAML files in ``simulations/configs/``. Loading and validating a mapping into
a ``RunConfig`` (strategy options included) is ``vfl.engine.schema.load_run_config``, which re-exports
these classes: the strategy ABC types its config with them without importing the loader.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from vfl.config.fields import param, to_dict
from vfl.config.party_files import LabelFile, PartyFile, SplitParties
from vfl.config.resources import ResourcesConfig

OPTIMIZERS = ("sgd", "adam", "adamw")  # train.optimizer (vfl.runtime.optim builds them)
LR_SCHEDULES = ("constant", "linear")  # train.lr_schedule


@dataclass(frozen=True)
class DataConfig:
    data_dir: str | None = param(None, help="directory holding real datasets (else $VFL_DATA_DIR)")
    partition: str = param("contiguous", help="vertical split: contiguous|interleaved|quadrants|strips|views|tokens")
    partition_opts: dict[str, Any] = param({}, help="extra partitioner options (e.g. sizes, orientation)")
    load_opts: dict[str, Any] = param({}, help="extra loader options (e.g. size, channels, views)")
    train_subsample: int | None = param(None, ge=1, help="use at most this many training samples")
    test_subsample: int | None = param(None, ge=1, help="use at most this many test samples")
    parties: tuple[PartyFile, ...] = param((), help="per-party files [{path, id, columns}], aligned by PSI")
    labels: LabelFile | None = param(None, help="the label holder's file {path, id, label, split}")
    split_parties: SplitParties | None = param(None, help="export `dataset` to per-party files on first "
                                                          "use {overlap, dir} and train from them")


@dataclass(frozen=True)
class ModelConfig:
    bottom: str = param("mlp", help="registered bottom model (party side)")
    bottom_hidden: tuple[int, ...] = param((32,), ge=1, help="hidden widths of MLP bottoms")
    embed_dim: int = param(16, ge=1, le=65536, help="embedding dimension P")
    tanh_c: float = param(1.0, gt=0, help="embedding range C (bottoms end in C*tanh)")
    fusion: str = param("sum", choices=("sum", "concat"), help="how the server fuses embeddings")
    head: str = param("mlp", help="registered fusion head (server side)")
    head_hidden: tuple[int, ...] = param((32,), ge=1, help="hidden widths of MLP heads")


@dataclass(frozen=True)
class TrainConfig:
    epochs: int = param(10, ge=1, le=100000, help="passes over the training set")
    batch_size: int = param(64, ge=1, le=1000000, help="training samples per step (one shared batch order)")  # the defaults are the demo's (digits: ~0.95 test acc)
    optimizer: str = param("sgd", choices=OPTIMIZERS, help="adam: torch Adam; adamw: torch AdamW")
    lr: float = param(0.05, gt=0, le=10, help="learning rate of every model's optimizer")
    momentum: float = param(0.9, ge=0, lt=1, help="SGD momentum (ignored by adam/adamw)")
    weight_decay: float = param(0.0, ge=0, help="L2 weight decay of the optimizer")
    device: str = param("cpu", help="torch device of every model: auto|cpu|cuda|cuda:N (resolved in each actor)")
    eval_every: int = param(1, ge=1, help="evaluate on the test set every N epochs (and at the end)")
    eval_batch_size: int = param(1000, ge=1, help="test batch size (at least batch_size is used)")
    log_every_steps: int = param(10, ge=1, le=1000000, help="split-LLM strategies: metrics.jsonl's step_loss holds "
                                 "the label holder's mean training loss of every N steps (the loss plot's curve)")
    checkpoint_every_steps: int = param(0, ge=0, le=100_000_000, help="also checkpoint after every N training steps "
                                        "inside an epoch (0 = at each epoch's end only); `vfl run --resume` goes on "
                                        "from the step after the last one, exactly (split-LLM strategies but sap)")
    threads_per_actor: int = param(1, ge=1, le=256, help="torch intra-op threads inside each actor")
    driver_threads: int | None = param(None, ge=1, le=256, help="torch intra-op threads of the driver process, "
                                       "where every node computes with transport.kind: inprocess "
                                       "(default: train.threads_per_actor)")
    local_steps: int = param(1, ge=1, le=1000, help="FedBCD Q: local updates of every party and the server "
                             "per exchange, the Q-1 extra ones on the same batch with the stale received "
                             "gradient/embeddings (1 = plain VFL; see docs/performance.md)")
    on_dropout: str = param("fail", choices=("fail", "skip-party"),
                            help="a party dead or past transport.round_timeout_s in a round: fail (PartyFailure) "
                                 "or skip-party (finish the round with the survivors, go on without it)")
    on_failure: str | None = param(None, choices=("restart", "fail"),
                                   help="a dead host: restart it from the last checkpoint, or fail "
                                        "(default: restart over Ray, fail in-process)")
    max_restarts: int = param(3, ge=0, le=10000, help="restarts allowed per run with on_failure=restart")
    lr_schedule: str = param("constant", choices=LR_SCHEDULES, help="lr over the run's optimizer steps: constant, "
                             "or linear decay to 0 at the last step (both after the warmup; split-LLM strategies)")
    warmup_steps: int = param(0, ge=0, help="optimizer steps of linear lr warmup from 0 (split-LLM strategies; "
                              "at most one of warmup_steps, warmup_ratio)")
    warmup_ratio: float = param(0.0, ge=0, lt=1, help="warmup as a fraction of the run's optimizer steps "
                                "(ceil(ratio · epochs · steps per epoch))")


@dataclass(frozen=True)
class TransportConfig:
    kind: str = param("inprocess", choices=("inprocess", "ray"), help="inprocess: every node in this process; "
                      "ray: nodes in Ray actors (a local cluster, or transport.address)")
    address: str | None = param(None, help="HOST:PORT of an existing Ray cluster (else a local one)")
    parties_per_actor: int = param(0, ge=0, help="parties hosted by one Ray actor (0 = auto)")
    cpus_per_actor: float = param(0.1, gt=0, le=64, help="Ray num_cpus reserved by each actor")
    gpus_per_actor: float = param(0.0, ge=0, le=64, help="Ray num_gpus reserved by each actor (fractions share a GPU)")
    max_actors: int = param(0, ge=0, help="upper bound on party actors when parties_per_actor=0 "
                            "(0 = auto: 2 per CPU core of this machine, at most 8)")
    round_timeout_s: float = param(120.0, gt=0, help="a party that has not answered a round within this many "
                                   "seconds is treated as dead (see train.on_dropout)")
    connect_timeout_s: float = param(30.0, gt=0, le=3600, help="give up joining transport.address after this")
    schedule_timeout_s: float = param(60.0, gt=0, le=86400, help="give up reserving every actor's CPUs/GPUs "
                                      "(one placement group per run) after this many seconds")
    timeout_s: float = param(1800.0, gt=0, le=86400, help="a Ray call outside the guarded training/eval hops "
                             "(set-up, PSI, SecAgg keys, LLM conversations) unanswered after this many seconds "
                             "fails the run naming the host (a hang detector: keep it above the slowest step)")
    compiled_graph: str = param("auto", choices=("auto", "on", "off"), help="kept for old configs: the Ray "
                                "Compiled Graph step was removed (the socket data plane was faster wherever both "
                                "were measured, docs/performance.md); on warns and the step takes "
                                "transport.data_plane")
    data_plane: str = param("ray", choices=("ray", "socket"), help="how a vertical training step's hops travel "
                            "over Ray: ray (a Ray task per hop) or socket (plain TCP between the host actors, "
                            "struct frames, a per-run token; about half the step time on 2 cores; "
                            "on_dropout: fail only, not with RAY_USE_TLS)")
    resources: ResourcesConfig = dataclasses.field(default_factory=ResourcesConfig, metadata={
        "help": "per-profile {cpus, gpus} of server, party, model_server actors (vfl/config/resources.py)"})


@dataclass(frozen=True)
class BottomDPConfig:
    """DP-SGD of every party's bottom model (Opacus): per-sample clipping + Gaussian noise."""

    noise_multiplier: float = param(gt=0, le=1e6, help="noise std / max_grad_norm on the summed clipped gradients")
    max_grad_norm: float = param(gt=0, le=1e6, help="per-sample gradient L2 clipping bound C")


@dataclass(frozen=True)
class PrivacyConfig:
    delta: float = param(1e-5, gt=0, lt=1, help="delta of the reported (epsilon, delta)")
    epsilon_budget: float | None = param(None, gt=0, help="stop cleanly before an epoch that would take epsilon past it (summary.json 'stopped')")
    noise_rng: str = param("crypto", choices=("crypto", "seeded"),
                           help="privacy noise from a keystream keyed with OS entropy held only by the node "
                                "that adds it (crypto), or from the run seed (seeded: reproducible debugging, "
                                "the reported epsilon is then not a guarantee)")
    bottom_dp: BottomDPConfig | None = param(None, help="{noise_multiplier, max_grad_norm}: train each party's "
                                             "bottom by DP-SGD and report an end-to-end epsilon (null = off)")
    target_epsilon: float | None = param(None, gt=0, help="calibrate params.beta (pbm) or params.sigma (ldp) "
                                         "at run start so the accountant's epsilon after train.epochs is this")
    colluders: int | None = param(None, ge=0, help="parties assumed to collude with the server (their inputs and "
                                  "noise known to it): the epsilon counts the noise of the M - c honest parties only "
                                  "(undeclared: 0), and SecAgg opens no single input with up to c of them (undeclared: "
                                  "t - 1, what its threshold tolerates); allowed 0..M-2")
    max_epoch_attempts: int | None = param(None, ge=1, le=1000000, help="each party's own cap on the releases of "
                                           "one training sample (epoch attempts: first tries, restarts, resumes); "
                                           "a training forward past it is refused (ReleaseRefused). Default: "
                                           "train.epochs + train.max_restarts + 2 (parties/vertical/release_guard.py)")
    record_views: bool = param(False, help="keep, per node, the arrays of the messages it received "
                               "(views/<node>.npz in the run directory; for attacks and audits)")
    record_max_mb: float = param(64.0, gt=0, le=1 << 20, help="upper bound on the recorded views per host (MiB; at "
                                 "most 1 TiB)")
    record_every: int = param(1, ge=1, help="record train round (epoch, step) when (epoch + step) % N == 0")


@dataclass(frozen=True)
class AttackConfig:
    """Adversarial nodes and audit canaries planted in a run (evaluation only; see docs/attacks.md)."""

    canaries: int = param(0, ge=0, help="one-run audit: training samples whose embedding at canary_party "
                          "is replaced by +C or -C (hidden random bit); 0 = no audit")
    canary_party: int = param(0, ge=0, help="0-based party index that plants the audit canaries")
    backdoor_party: int | None = param(None, ge=0, help="0-based index of a malicious passive party running "
                                       "the gradient-replacement backdoor (null = none)")
    backdoor_target: int = param(0, ge=0, help="class the backdoor pushes triggered samples to")
    backdoor_known: int = param(10, ge=1, help="training samples of the target class the attacker knows")
    backdoor_poison: int = param(50, ge=1, help="training samples the attacker stamps with its trigger")
    backdoor_amplify: float = param(10.0, gt=0, help="gradient amplification gamma of the replacement")
    backdoor_trigger: float = param(3.0, help="value written into the trigger features")
    backdoor_trigger_size: int = param(4, ge=1, help="number of the attacker's features the trigger overwrites")
    amc_party: int | None = param(None, ge=0, help="0-based index of a passive party training its bottom with "
                                  "Fu et al.'s malicious local optimizer (active model completion; null = none)")
    amc_scale: float = param(4.0, gt=0, le=100, help="factor the amc_party multiplies each of its own bottom "
                             "updates by (1 = honest)")


@dataclass(frozen=True)
class RunConfig:
    name: str = param("run", help="run name (output folder prefix)")
    seed: int = param(0, ge=0, help="seed of the data split, model init and batch order (privacy noise: see "
                                      "privacy.noise_rng)")
    strategy: str = param("npq", help="registered strategy (see `vfl strategies`)")
    dataset: str = param("digits", help="registered dataset (see `vfl datasets`) or \"module:factory\" (docs/usage.md)")
    num_parties: int = param(4, ge=1, le=100000, help="number of passive parties M")
    data: DataConfig = dataclasses.field(default_factory=DataConfig)
    model: ModelConfig = dataclasses.field(default_factory=ModelConfig)
    train: TrainConfig = dataclasses.field(default_factory=TrainConfig)
    transport: TransportConfig = dataclasses.field(default_factory=TransportConfig)
    privacy: PrivacyConfig = dataclasses.field(default_factory=PrivacyConfig)
    attack: AttackConfig = dataclasses.field(default_factory=AttackConfig)
    params: Any = param({}, help="strategy options (validated by the strategy)")
    defenses: tuple[dict[str, Any], ...] = param((), help="defenses [{kind: NAME, ...options}] applied by the "
                                                 "label holder (see `vfl defenses`; options in config-help)")
    auth: bool = param(True, help="Ed25519+X25519 keys per node; every message authenticated (HMAC per unicast, Ed25519 per broadcast)")
    tracking: str | tuple[str, ...] = param("none", choices=("none", "csv", "tensorboard", "mlflow", "wandb"),
                                            help="also send each metrics row (and the config, and the run's files "
                                                 "as artifacts) to: csv (metrics.csv), tensorboard, mlflow, wandb "
                                                 "(extras); one name or a list, e.g. [csv, mlflow]")

    def to_dict(self) -> dict[str, Any]:
        return to_dict(self)  # type: ignore[no-any-return]
