"""PBM-VFL end to end on the offline demo data (sklearn digits, 4 parties, 20 epochs, in-process: PBM over
Ray actors is tests/ray/test_all_strategies.py): accuracy within 5 points of NPQ at b=64, beta=0.25, and
k/32 of NPQ's upstream payload."""

from __future__ import annotations

from simulations.cli.runner import execute, resolve_config


def _run(strategy, tmp_path):
    sets = [f"strategy={strategy}", "params.b=64", "params.beta=0.25"] if strategy == "pbm" else \
        [f"strategy={strategy}", "params={}"]
    return execute(resolve_config("demo", [*sets, "transport.kind=inprocess"]), out_dir=tmp_path / strategy,
                   progress=False).summary


def test_pbm_close_to_npq_with_k_over_32_of_its_bytes(tmp_path):
    npq = _run("npq", tmp_path)
    pbm = _run("pbm", tmp_path)
    assert npq["transport"] == pbm["transport"] == "inprocess"
    assert npq["final_test_acc"] > 0.9
    assert pbm["final_test_acc"] >= npq["final_test_acc"] - 0.05, (pbm["final_test_acc"], npq["final_test_acc"])
    k = pbm["bits_per_element"]
    assert k == 9  # 2^9 = 512 > b*M = 256
    expected = k / 32 * npq["payload_bytes_up"]
    assert abs(pbm["payload_bytes_up"] - expected) <= 0.10 * expected
    assert pbm["payload_bytes_up"] <= 1.05 * pbm["information_bound_bytes_up"]
    assert pbm["epsilon"] > 0 and pbm["delta"] == 1e-5
    assert pbm["setup_bytes"] > 0  # key agreement and Shamir shares went over the wire
