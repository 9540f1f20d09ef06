"""``vfl report`` / ``vfl attack ushape_leak`` on U-shaped runs with recorded views: the model server's
attacks (``parties/llm/ushape/attacks.py``) replayed on what it received, scored against the client's
first batch. ``ushape-lora`` is the control (its gradient names every response token); ``ushape-p3eft``'s
pieces name none; at split 0 without noise the head's release names every token."""

from __future__ import annotations

import pytest

from simulations.cli.runner import execute, resolve_config
from simulations.report.render import load_run, run_attacks

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py

SMALL = ["train.epochs=1", "data.train_subsample=32", "data.test_subsample=4", "params.gen_samples=0",
         "params.split=0", "params.tail_blocks=0", "privacy.record_views=true"]


def leak(llama, tmp_path, strategy: str) -> dict:
    execute(resolve_config("instruct-u-tiny", [f"params.model_dir={llama}", f"strategy={strategy}", *SMALL]),
            out_dir=tmp_path / strategy, progress=False)
    results, skipped = run_attacks(load_run(tmp_path / strategy), ("ushape_leak",))
    assert not skipped
    return {r.name: r for r in results}


def test_the_report_replays_the_servers_attacks_on_a_u_shaped_run(llama, tmp_path):
    plain, private = leak(llama, tmp_path, "ushape-lora"), leak(llama, tmp_path, "ushape-p3eft")
    assert set(plain) == {"ushape_label_gradient", "ushape_tokens_nearest"}
    assert set(private) == {"ushape_label_gradient", "ushape_label_update", "ushape_tokens_nearest"}
    assert plain["ushape_label_gradient"].value == 1.0  # control: the gradient names every response token
    assert private["ushape_label_gradient"].value < 0.05  # each server's piece: about chance (1/400)
    assert set(private["ushape_label_gradient"].details["per_server"]) == {"server0", "server1"}
    assert plain["ushape_tokens_nearest"].value == private["ushape_tokens_nearest"].value == 1.0  # split 0, no η
    assert 0 <= private["ushape_label_update"].value <= 1


def test_a_run_without_views_is_skipped_with_the_reason(llama, tmp_path):
    execute(resolve_config("instruct-u-tiny", [f"params.model_dir={llama}", *SMALL[:-1]]), out_dir=tmp_path / "r",
            progress=False)
    results, skipped = run_attacks(load_run(tmp_path / "r"), ("ushape_leak",))
    assert not results and "record_views" in skipped["ushape_leak"]
