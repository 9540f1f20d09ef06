"""Tiny synthetic datasets written IN EACH REAL FORMAT, so tests run the real parsing code.

``write_fixtures(out)`` makes ``out`` a valid data directory for har, cifar10, modelnet10,
phishing, sst2, text-csv, imagefolder, imagenet100 and the tree benchmarks' tables default-credit,
give-me-some-credit, bank-marketing and a9a (``tabular_fixtures.py``) (seeded, class-dependent
values, < 2 s).
CLI: ``python -m simulations.data.fixtures OUT_DIR [--seed N]``.
"""

from __future__ import annotations

import argparse
import csv
import pickle
from pathlib import Path

import numpy as np

from simulations.data.tabular_fixtures import write_tabular

# Sizes of the tiny sets (train, test); the loaders' tests assert these.
HAR_SIZES = (36, 12)
CIFAR_PER_BATCH, CIFAR_TEST = 8, 10
MODELNET_OBJECTS = (2, 1)  # per class
PHISHING_ROWS = 60
SST2_SIZES = (40, 12)
TEXT_ROWS = 30
IMAGE_CLASSES, IMAGES_PER_CLASS = ("n01440764", "n01443537", "n01484850"), (4, 2)
PHISHING_ATTRIBUTES = (
    "having_IP_Address", "URL_Length", "Shortining_Service", "having_At_Symbol", "double_slash_redirecting",
    "Prefix_Suffix", "having_Sub_Domain", "SSLfinal_State", "Domain_registeration_length", "Favicon", "port",
    "HTTPS_token", "Request_URL", "URL_of_Anchor", "Links_in_tags", "SFH", "Submitting_to_email",
    "Abnormal_URL", "Redirect", "on_mouseover", "RightClick", "popUpWidnow", "Iframe", "age_of_domain",
    "DNSRecord", "web_traffic", "Page_Rank", "Google_Index", "Links_pointing_to_page", "Statistical_report")
WORDS = {0: ("dull", "boring", "awful", "flat", "tedious"), 1: ("moving", "funny", "sharp", "lovely", "bold")}


def write_har(out: Path, rng: np.random.Generator, sizes: tuple[int, int] = HAR_SIZES) -> None:
    """``UCI HAR Dataset/{train,test}/{X,y}_*.txt``: 561 space-separated e-notation floats per row
    (``sizes=(7352, 2947)`` gives a full-size synthetic twin for benchmarks)."""
    centers = rng.uniform(-0.6, 0.6, size=(6, 561))
    for split, n in zip(("train", "test"), sizes, strict=True):
        d = out / "UCI HAR Dataset" / split
        d.mkdir(parents=True, exist_ok=True)
        y = np.arange(n) % 6 + 1
        x = np.clip(centers[y - 1] + rng.normal(0, 0.2, size=(n, 561)), -1, 1)
        with open(d / f"X_{split}.txt", "w") as f:  # the public files use 3-digit exponents
            for row in x:
                f.write(" " + " ".join(f"{np.format_float_scientific(v, precision=7, exp_digits=3):>15}"
                                 for v in row) + "\n")
        (d / f"y_{split}.txt").write_text("".join(f"{v}\n" for v in y))


def _cifar_batch(rng: np.random.Generator, n: int, label: str) -> dict[bytes, object]:
    y = rng.integers(0, 10, size=n)
    base = (np.arange(10)[:, None] * 25).astype(np.int16)  # class-dependent brightness
    data = np.clip(base[y] + rng.integers(-20, 20, size=(n, 3072)), 0, 255).astype(np.uint8)
    return {b"batch_label": label.encode(), b"labels": [int(v) for v in y], b"data": data,
            b"filenames": [f"img_{i:05d}.png".encode() for i in range(n)]}


def write_cifar(out: Path, rng: np.random.Generator) -> None:
    """``cifar-10-batches-py/{data_batch_1..5,test_batch,batches.meta}`` as pickled dicts (bytes keys)."""
    from simulations.data.cifar import CLASSES

    d = out / "cifar-10-batches-py"
    d.mkdir(parents=True, exist_ok=True)
    batches = {f"data_batch_{i}": _cifar_batch(rng, CIFAR_PER_BATCH, f"training batch {i} of 5") for i in range(1, 6)}
    batches["test_batch"] = _cifar_batch(rng, CIFAR_TEST, "testing batch 1 of 1")
    batches["batches.meta"] = {b"num_cases_per_batch": CIFAR_PER_BATCH, b"num_vis": 3072,
                               b"label_names": [c.encode() for c in CLASSES]}
    for name, obj in batches.items():
        with open(d / name, "wb") as f:
            pickle.dump(obj, f, protocol=2)


def write_modelnet(out: Path, rng: np.random.Generator, size: int = 16) -> None:
    """``modelnet10-views/<class>/<split>/<class>_<NNNN>.obj.shaded_v<VVV>.png`` (12 gray views)."""
    from PIL import Image

    from simulations.data.modelnet import CLASSES, TOTAL_VIEWS

    for c, cls in enumerate(CLASSES):
        obj_id = 1
        for split, n in zip(("train", "test"), MODELNET_OBJECTS, strict=True):
            d = out / "modelnet10-views" / cls / split
            d.mkdir(parents=True, exist_ok=True)
            for _ in range(n):
                for v in range(1, TOTAL_VIEWS + 1):
                    px = np.clip(c * 20 + v * 3 + rng.integers(0, 30, size=(size, size)), 0, 255).astype(np.uint8)
                    Image.fromarray(px).save(d / f"{cls}_{obj_id:04d}.obj.shaded_v{v:03d}.png")
                obj_id += 1


def write_phishing(out: Path, rng: np.random.Generator) -> None:
    """``phishing/Training Dataset.arff`` (UCI) and ``phishing/phishing.csv`` (OpenML-style)."""
    d = out / "phishing"
    d.mkdir(parents=True, exist_ok=True)
    y = np.where(np.arange(PHISHING_ROWS) % 2 == 0, -1, 1)
    x = np.where(rng.random((PHISHING_ROWS, 30)) < 0.7, y[:, None], rng.integers(-1, 2, size=(PHISHING_ROWS, 30)))
    rows = [",".join(str(v) for v in (*r, c)) for r, c in zip(x, y, strict=True)]
    head = ["@relation phishing", ""] + [f"@attribute {a}  {{ -1,0,1 }}" for a in PHISHING_ATTRIBUTES]
    head += ["@attribute Result  { -1,1 }", "", "@data"]
    (d / "Training Dataset.arff").write_text("\n".join(head + rows) + "\n")
    (d / "phishing.csv").write_text(",".join((*PHISHING_ATTRIBUTES, "Result")) + "\n" + "\n".join(rows) + "\n")


def _sentence(rng: np.random.Generator, label: int, n: int = 6) -> str:
    words = [str(w) for w in rng.choice(WORDS[label], size=3)] + ["the", "film", "is", "a"][: n - 3]
    return " ".join(str(w) for w in rng.permutation(np.asarray(words, dtype=object)))


def write_text(out: Path, rng: np.random.Generator) -> None:
    """``SST-2/{train,dev}.tsv`` (GLUE: ``sentence<TAB>label``) and ``text.csv`` (``text,label``)."""
    d = out / "SST-2"
    d.mkdir(parents=True, exist_ok=True)
    for name, n in zip(("train.tsv", "dev.tsv"), SST2_SIZES, strict=True):
        lines = [f"{_sentence(rng, i % 2)} \t{i % 2}" for i in range(n)]
        (d / name).write_text("sentence\tlabel\n" + "\n".join(lines) + "\n")
    with open(out / "text.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["text", "label"])
        for i in range(TEXT_ROWS):  # quotes and commas exercise the CSV quoting
            w.writerow([f'{_sentence(rng, i % 2)}, "quoted"', ("neg", "pos")[i % 2]])


def write_image_trees(out: Path, rng: np.random.Generator, size: int = 24) -> None:
    """``imagenet100/{train,val}/<wnid>/*.JPEG`` and ``imagefolder/{train,test}/<class>/*.png``."""
    from PIL import Image

    for root, val, ext in (("imagenet100", "val", "JPEG"), ("imagefolder", "test", "png")):
        for c, cls in enumerate(IMAGE_CLASSES):
            for split, n in zip(("train", val), IMAGES_PER_CLASS, strict=True):
                d = out / root / split / cls
                d.mkdir(parents=True, exist_ok=True)
                for i in range(n):
                    px = np.clip(c * 80 + rng.integers(0, 40, size=(size, size + 4, 3)), 0, 255).astype(np.uint8)
                    Image.fromarray(px).save(d / f"{cls}_{i}.{ext}")


def write_fixtures(out: str | Path, *, seed: int = 0) -> Path:
    """Write every real-format fixture under ``out`` (a data_dir for all real-format loaders)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for write in (write_har, write_cifar, write_modelnet, write_phishing, write_text, write_image_trees, write_tabular):
        write(out, rng)
    return out


def main(argv: list[str] | None = None) -> int:
    """CLI: write the fixtures into OUT_DIR."""
    ap = argparse.ArgumentParser(prog="python -m simulations.data.fixtures", description=__doc__)
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    out = write_fixtures(args.out_dir, seed=args.seed)
    print(f"wrote fixture datasets to {out} (use it as data.data_dir or $VFL_DATA_DIR)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
