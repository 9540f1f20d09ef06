"""The paillier benchmark writes the keys the trees strategy's issue names (a 512-bit key, no pool
workers: the unit lane starts no process; the full run is measured by hand, docs/he.md)."""

from __future__ import annotations

import json

from simulations.benchmarks.paillier import main


def test_paillier_json_keys(tmp_path, capsys) -> None:
    assert main(["--out", str(tmp_path), "--bits", "512", "--n", "20", "--repeats", "1", "--workers", "0"]) == 0
    saved = json.loads((tmp_path / "paillier.json").read_text())
    rates = ("encrypt_per_s_per_core", "public_encrypt_per_s_per_core", "randomizer_per_s_per_core",
             "add_per_s_per_core", "decrypt_per_s_per_core", "pack_per_s", "grouped_sum_rows_per_s")
    assert all(saved[k] > 0 for k in rates) and (saved["key_bits"], saved["ciphertext_bytes"]) == (512, 128)
    assert set(saved["grouped_sum_variants"]) == {"sorted_runs", "one_pass", "lazy_reduce_2", "lazy_reduce_4"}
    heu = saved["published"]["heu_zpaillier"]
    assert heu["source"] == "SecretFlow HEU documentation" and heu["measured_here"] is False
    assert "encrypt_with_pool_per_s" not in saved  # --workers 0 skips the pool rows
    printed = capsys.readouterr().out
    assert "below the 2048-bit minimum" in printed and "published, not measured here" in printed
