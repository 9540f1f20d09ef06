"""Text tasks from JSON Lines files or Hugging Face ``datasets``, single texts or sentence pairs.

``text-jsonl``: ``<data_dir>/train.jsonl`` (+ optional ``test.jsonl``, else a seeded stratified 80/20
split); one JSON object per line with ``text``, ``label`` and, for sentence-pair tasks (QNLI, MNLI,
MRPC, QQP, RTE), ``text_pair``. ``hf-datasets``: a dataset the installed ``datasets`` library can
load offline (a local path or a cached hub id), e.g. ``path: glue, subset: mrpc, text_key: sentence1,
pair_key: sentence2``. ``tiny-pairs``: the shipped MRPC-style set of ``gen_pairs``. The second text
goes into ``extras['text_pair_train' / 'text_pair_test']`` (what the split-LLM strategies read).
Instruction tuning: ``instruct-jsonl`` reads ``{"prompt": ..., "response": ...}`` lines and
``tiny-instruct`` is the shipped set of ``gen_instruct``; the prompts are the texts, the responses go into
``extras['response_train' / 'response_test']`` (what ``ushape-lora`` reads; the class labels are all 0).
"""

from __future__ import annotations

import dataclasses
import json
from importlib.resources import files
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from simulations.data.common import labels_to_ids, missing, stratified_split
from simulations.data.registry import DATASETS, bundled
from vfl.core.errors import DataError
from vfl.core.rng import derive_seed
from vfl.data.dataset import Dataset

TEST_FRACTION = 0.2
PAIR = "text_pair"


def _strs(items: list[str]) -> np.ndarray:
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out


class Part(NamedTuple):
    """One split as read: texts, second texts (None: single texts), raw labels, other columns."""

    texts: list[str]
    pairs: list[str] | None
    labels: list[Any]
    columns: dict[str, list[Any]] = {}  # noqa: RUF012 (never mutated: a fresh dict per read)


def read_jsonl(path: Path, *, text_key: str = "text", pair_key: str = PAIR, label_key: str = "label") -> Part:
    """Texts, second texts (None when no line has ``pair_key``), raw labels and every other key that
    is on every line (e.g. a private attribute for the attribute-inference attack) of a JSONL file."""
    texts: list[str] = []
    pairs: list[str] = []
    labels: list[Any] = []
    columns: dict[str, list[Any]] = {}
    has_pair: bool | None = None
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"text-jsonl: {path} line {n} is not JSON ({exc.msg})") from None
            if not isinstance(row, dict) or text_key not in row or label_key not in row:
                raise DataError(f"text-jsonl: {path} line {n} needs keys {text_key!r} and {label_key!r}")
            if has_pair is None:
                has_pair = pair_key in row
            elif (pair_key in row) != has_pair:
                raise DataError(f"text-jsonl: {path} line {n}: {pair_key!r} must be on every line or on none")
            if isinstance(row[label_key], (dict, list)) or row[label_key] is None:
                raise DataError(f"text-jsonl: {path} line {n} has label {row[label_key]!r}; allowed: an int or a string")
            other = {k: v for k, v in row.items() if k not in (text_key, pair_key, label_key)}
            if not texts:
                columns = {k: [] for k, v in other.items() if isinstance(v, (str, int, float, bool))}
            for k, col in columns.items():
                if k not in other:
                    raise DataError(f"text-jsonl: {path} line {n} has no {k!r} (line 1 has it: every line or none)")
                col.append(other[k])
            texts.append(str(row[text_key]))
            if pair_key in row:
                pairs.append(str(row[pair_key]))
            labels.append(row[label_key])
    if not texts:
        raise DataError(f"text-jsonl: {path} has no lines")
    return Part(texts, (pairs or None), labels, columns)


def pair_dataset(name: str, *, train: Part, test: Part | None, seed: int) -> Dataset:
    """A text Dataset from the train and, if any, test ``Part``; else a seeded split. Extra columns
    on both go into ``extras`` (``<col>`` train then test, ``<col>_train``, ``<col>_test``)."""
    te = test if test is not None else Part([], None, [], {k: [] for k in train.columns})
    if test is not None and (train[1] is None) != (test[1] is None):
        raise DataError(f"{name}: the train and test files must both have {PAIR!r} or neither")
    raw = train[2] + te[2]
    as_str = any(isinstance(v, str) for v in raw)  # strings sort by name, integers keep their order
    ids, names = labels_to_ids(np.asarray([str(v) for v in raw]) if as_str else np.asarray(raw, dtype=np.int64))
    if len(names) < 2:
        raise DataError(f"{name}: needs at least 2 distinct labels, got {list(names)}")
    x = _strs(train[0] + te[0])
    px = _strs((train[1] or []) + (te[1] or [])) if train[1] is not None else None
    if test is not None:
        tr, ts = np.arange(len(train[0])), np.arange(len(train[0]), len(x))
    else:
        tr, ts = stratified_split(ids, test_fraction=TEST_FRACTION, seed=seed, salt=name)
    extras = {} if px is None else {f"{PAIR}_train": px[tr], f"{PAIR}_test": px[ts]}
    for col in sorted(set(train.columns) & set(te.columns)):
        vals = np.asarray(train.columns[col] + te.columns[col])
        extras.update({f"{col}_train": vals[tr], f"{col}_test": vals[ts], col: np.concatenate([vals[tr], vals[ts]])})
    return Dataset(name, x[tr], ids[tr], x[ts], ids[ts], len(names), "text", "accuracy",
                   tuple(str(n) for n in names), extras)


@DATASETS.register("text-jsonl")
def load_text_jsonl(*, data_dir: Path | None, seed: int = 0, file: str = "train.jsonl",
                    test_file: str = "test.jsonl", text_key: str = "text", pair_key: str = PAIR,
                    label_key: str = "label") -> Dataset:
    """``<data_dir>/train.jsonl`` (+ optional ``test.jsonl``): text or sentence-pair classification."""
    path = data_dir / file if data_dir is not None else None
    if path is None or not path.is_file():
        raise missing("text-jsonl", expected=(file, f"{test_file} (optional)"), url="your own data (JSON Lines "
                      "with 'text', 'label' and optionally 'text_pair'; python -m simulations.data.gen_pairs "
                      "writes an example)", data_dir=data_dir)
    keys = dict(text_key=text_key, pair_key=pair_key, label_key=label_key)
    test_path = path.parent / test_file
    return pair_dataset("text-jsonl", train=read_jsonl(path, **keys),
                        test=read_jsonl(test_path, **keys) if test_path.is_file() else None, seed=seed)


@DATASETS.register("tiny-pairs")
@bundled
def load_tiny_pairs(*, data_dir: Path | None = None, seed: int = 0) -> Dataset:
    """The shipped MRPC-style paraphrase pairs (240 train / 80 test, 2 classes; ``gen_pairs``)."""
    root = files("simulations.data").joinpath("tiny_pairs")
    parts: list[Part] = []
    for split in ("train", "test"):
        res = root.joinpath(f"{split}.jsonl")
        if not res.is_file():  # an install without the data files: the generator gives the same lines
            from simulations.data.gen_pairs import generate

            lines = generate()[split == "test"]
            parts.append(Part([str(x["text"]) for x in lines], [str(x[PAIR]) for x in lines], [x["label"] for x in lines],
                              {"topic": [x["topic"] for x in lines]}))
            continue
        parts.append(read_jsonl(Path(str(res))))
    ds = pair_dataset("tiny-pairs", train=parts[0], test=parts[1], seed=seed)
    return dataclasses.replace(ds, class_names=("not_paraphrase", "paraphrase"))


@DATASETS.register("hf-datasets")
def load_hf_datasets(*, data_dir: Path | None = None, seed: int = 0, path: str = "", subset: str | None = None,
                     train_split: str = "train", test_split: str = "validation", text_key: str = "sentence",
                     pair_key: str | None = None, label_key: str = "label") -> Dataset:
    """A Hugging Face dataset loaded offline by the ``datasets`` library (if installed)."""
    try:
        import datasets
    except ImportError:
        raise DataError("hf-datasets: the 'datasets' package is not installed (pip install datasets), or export "
                        "the task to JSON Lines and use dataset: text-jsonl") from None
    if not path:
        raise DataError("hf-datasets: data.load_opts.path is required (a local dataset directory or a cached hub "
                        "id, e.g. glue with subset: mrpc)")
    try:
        dd = datasets.load_dataset(path, subset, cache_dir=str(data_dir) if data_dir else None)
    except Exception as exc:  # offline and not cached, unknown config, ...
        raise DataError(f"hf-datasets: could not load {path!r} (subset {subset!r}) offline: "
                        f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from None
    parts: list[Part] = []
    for split in (train_split, test_split):
        if split not in dd:
            raise DataError(f"hf-datasets: {path!r} has no split {split!r}; it has {sorted(dd)}")
        d = dd[split]
        for key in (text_key, label_key, *((pair_key,) if pair_key else ())):
            if key not in d.column_names:
                raise DataError(f"hf-datasets: split {split!r} has no column {key!r}; it has {d.column_names}")
        labels = list(d[label_key])
        if any(int(v) < 0 for v in labels):  # GLUE test splits hide their labels as -1
            raise DataError(f"hf-datasets: split {split!r} has unlabeled rows (label -1); pick a labeled split")
        parts.append(Part([str(t) for t in d[text_key]], [str(t) for t in d[pair_key]] if pair_key else None, labels))
    return pair_dataset(f"hf:{path}" + (f"/{subset}" if subset else ""), train=parts[0], test=parts[1], seed=seed)


RESPONSE = "response"


def read_instructions(path: Path, *, prompt_key: str = "prompt", response_key: str = RESPONSE) -> tuple[list[str], list[str]]:
    """Prompts and responses of a JSONL instruction file (every line a JSON object with both keys, strings)."""
    prompts: list[str] = []
    responses: list[str] = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"instruct-jsonl: {path} line {n} is not JSON ({exc.msg})") from None
            if not isinstance(row, dict) or not all(isinstance(row.get(k), str) for k in (prompt_key, response_key)):
                raise DataError(f"instruct-jsonl: {path} line {n} needs string keys {prompt_key!r} and {response_key!r}")
            prompts.append(row[prompt_key])
            responses.append(row[response_key])
    if not prompts:
        raise DataError(f"instruct-jsonl: {path} has no lines")
    return prompts, responses


def instruction_dataset(name: str, *, train: tuple[list[str], list[str]], test: tuple[list[str], list[str]] | None,
                        seed: int) -> Dataset:
    """A text Dataset of prompts with the responses in ``extras['response_train' / 'response_test']``;
    without ``test`` a seeded 80/20 split of ``train``."""
    prompts, responses = _strs(train[0] + (test[0] if test else [])), _strs(train[1] + (test[1] if test else []))
    if test is not None:
        tr, ts = np.arange(len(train[0])), np.arange(len(train[0]), len(prompts))
    else:
        order = np.random.default_rng(derive_seed(name, seed)).permutation(len(prompts))
        cut = len(prompts) - max(1, int(round(TEST_FRACTION * len(prompts))))
        if cut < 1:
            raise DataError(f"{name}: {len(prompts)} line(s) cannot be split into train and test; give a test file")
        tr, ts = np.sort(order[:cut]), np.sort(order[cut:])
    return Dataset(name, prompts[tr], np.zeros(len(tr), np.int64), prompts[ts], np.zeros(len(ts), np.int64), 2, "text",
                   "accuracy", (), {f"{RESPONSE}_train": responses[tr], f"{RESPONSE}_test": responses[ts]})


@DATASETS.register("instruct-jsonl")
def load_instruct_jsonl(*, data_dir: Path | None, seed: int = 0, file: str = "train.jsonl",
                        test_file: str = "test.jsonl", prompt_key: str = "prompt",
                        response_key: str = RESPONSE) -> Dataset:
    """``<data_dir>/train.jsonl`` (+ optional ``test.jsonl``): prompt/response pairs for instruction tuning."""
    path = data_dir / file if data_dir is not None else None
    if path is None or not path.is_file():
        raise missing("instruct-jsonl", expected=(file, f"{test_file} (optional)"), url="your own data (JSON Lines "
                      "with 'prompt' and 'response'; python -m simulations.data.gen_instruct writes an example)",
                      data_dir=data_dir)
    keys = dict(prompt_key=prompt_key, response_key=response_key)
    test_path = path.parent / test_file
    return instruction_dataset("instruct-jsonl", train=read_instructions(path, **keys),
                               test=read_instructions(test_path, **keys) if test_path.is_file() else None, seed=seed)


@DATASETS.register("tiny-instruct")
@bundled
def load_tiny_instruct(*, data_dir: Path | None = None, seed: int = 0) -> Dataset:
    """The shipped instruction set (320 train / 64 test prompt/response pairs; ``gen_instruct``)."""
    root = files("simulations.data").joinpath("tiny_instruct")
    parts: list[tuple[list[str], list[str]]] = []
    for split in ("train", "test"):
        res = root.joinpath(f"{split}.jsonl")
        if not res.is_file():  # an install without the data files: the generator gives the same lines
            from simulations.data.gen_instruct import generate

            lines = generate()[split == "test"]
            parts.append(([x["prompt"] for x in lines], [x["response"] for x in lines]))
            continue
        parts.append(read_instructions(Path(str(res))))
    return instruction_dataset("tiny-instruct", train=parts[0], test=parts[1], seed=seed)
