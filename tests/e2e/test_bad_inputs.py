"""Every bad input exits non-zero with ONE line naming the key/file/value and what is allowed
(run in-process through ``simulations.cli.main.main``; all of these fail before any training)."""

from __future__ import annotations

import contextlib
import os
import socket
import threading

import pytest
import torch

from simulations.cli.main import main
from simulations.cli.runner import default_out_dir, resolve_config

FAST = ["--transport", "inprocess", "--no-progress"]


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err, err
    assert len(err.splitlines()) == 1, err
    return err


@pytest.mark.parametrize("override,needle", [
    ("train.lr=.nan", "train.lr: got nan; expected a finite number"),
    ("train.lr=inf", "train.lr: got inf; expected a finite number"),
    ("train.momentum=.inf", "train.momentum: got inf; expected a finite number"),
    ("train.weight_decay=nan", "train.weight_decay: got nan; expected a finite number"),
    ("model.tanh_c=.nan", "model.tanh_c: got nan"),
    ("model.bottom_hidden=[-4]", "model.bottom_hidden[0]: got -4; allowed: a value in [1, inf)"),
    ("model.bottom_hidden=[0]", "model.bottom_hidden[0]: got 0"),
    ("model.head_hidden=[8, 0]", "model.head_hidden[1]: got 0"),
    ("train.lr=fast", "train.lr: got 'fast'; expected a number"),
])
def test_bad_values_name_the_key(override, needle, tmp_path, capsys):
    assert main(["run", "demo", "--out", str(tmp_path / "r"), *FAST, "--set", override]) == 2
    line = _one_line(capsys)
    assert line.startswith("vfl: error: ") and needle in line, line
    assert not (tmp_path / "r").exists()


def test_float_syntax_yaml_reads_as_string_is_accepted(tmp_path):
    assert resolve_config("demo", ["train.lr=1e-3"]).train.lr == pytest.approx(1e-3)
    cfg = tmp_path / "c.yaml"
    cfg.write_text("strategy: npq\ntrain:\n  lr: 5e-2\n  weight_decay: 1E-4\n")
    got = resolve_config(cfg)
    assert got.train.lr == pytest.approx(0.05) and got.train.weight_decay == pytest.approx(1e-4)


def _config_file(tmp_path, text: str | None):
    if text is None:  # a directory
        (tmp_path / "conf.yaml").mkdir()
    else:
        (tmp_path / "conf.yaml").write_text(text)
    return str(tmp_path / "conf.yaml")


@pytest.mark.parametrize("text,needle", [
    ("train:\n  lr: 0.1\n  lr: 0.2\n", "duplicate key 'lr'"),
    ("strategy: npq\nstrategy: pbm\n", "duplicate key 'strategy'"),
    ("", "is empty"),
    ("# only a comment\n", "is empty"),
    (None, "is a directory"),
    ("- a\n- b\n", "must hold a mapping"),
    ("train: [unclosed\n", "is not valid YAML"),
])
def test_bad_config_files_name_the_file(text, needle, tmp_path, capsys):
    path = _config_file(tmp_path, text)
    assert main(["run", path, "--out", str(tmp_path / "r"), *FAST]) == 2
    line = _one_line(capsys)
    assert line.startswith("vfl: error: CONFIG: ") and needle in line and "conf.yaml" in line, line


def _laughs(levels: int, width: int = 9) -> str:
    """A "billion laughs" alias bomb inside the free-form ``data.partition_opts`` mapping."""
    names = [f"l{i}" for i in range(levels + 1)]
    rows = [f"    {names[0]}: &{names[0]} [" + ", ".join(["lol"] * width) + "]"]
    rows += [f"    {names[i]}: &{names[i]} [" + ", ".join([f"*{names[i - 1]}"] * width) + "]"
             for i in range(1, levels + 1)]
    return "strategy: npq\ndata:\n  partition_opts:\n" + "\n".join(rows) + "\n"


@pytest.mark.parametrize("text,needle", [
    ("train: &t {lr: *t}\n", "line 1: a recursive alias (the anchored node contains an alias to itself)"),
    ("data:\n  partition_opts: &o\n    more: [1, *o]\n", "a recursive alias"),
    ("params: &p [*p]\n", "a recursive alias"),
    (_laughs(9), "aliases expand this node to more than 100000 values; allowed: at most 100000"),
    (_laughs(6, width=8), "aliases expand this node to more than 100000 values"),  # 8^7 = 2.1M values
    ("data:\n  load_opts: " + "[" * 300 + "]" * 300 + "\n", "nested deeper than 200 levels; allowed: at most 200"),
    ("data:\n  load_opts: " + "[" * 50000 + "]" * 50000 + "\n", "nested too deep to parse; allowed: at most 200"),
])
def test_yaml_alias_bombs_and_recursion_are_one_line(text, needle, tmp_path, capsys):
    import time

    path = _config_file(tmp_path, text)
    t0 = time.perf_counter()
    assert main(["run", path, "--out", str(tmp_path / "r"), *FAST]) == 2
    assert time.perf_counter() - t0 < 20  # refused before expanding (a bomb used to run until killed)
    line = _one_line(capsys)
    assert line.startswith("vfl: error: CONFIG: ") and "conf.yaml is not valid YAML: " in line and needle in line, line
    assert not (tmp_path / "r").exists()


def test_yaml_aliases_and_merge_keys_within_bounds_work(tmp_path):
    """Control: plain aliases (a value used twice) and merge keys stay allowed; the bomb above with
    two levels expands to 820 values and is accepted too."""
    from vfl.config.fields import load_yaml

    assert load_yaml("b: &b {lr: 0.2, epochs: 2}\ntrain:\n  <<: *b\n  lr: 0.3\n")["train"] == {"lr": 0.3, "epochs": 2}
    got = resolve_config(_config_file(tmp_path, "strategy: npq\nmodel:\n  bottom_hidden: &w [8]\n  head_hidden: *w\n"))
    assert got.model.head_hidden == got.model.bottom_hidden == (8,)
    opts = resolve_config(_config_file(tmp_path, _laughs(2))).data.partition_opts
    assert len(opts["l2"]) == 9 and opts["l2"][0][0] == ["lol"] * 9


def test_alias_bomb_in_a_set_value(tmp_path, capsys):
    bomb = "{a: &a [1,1,1,1,1,1,1,1,1,1], b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a], c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b], " \
           "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c], e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d], f: [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]}"
    assert main(["run", "demo", *FAST, "--out", str(tmp_path / "r"), "--set", f"data.partition_opts={bomb}"]) == 2
    line = _one_line(capsys)
    assert "data.partition_opts: line 1: aliases expand this node to more than 100000 values" in line, line


def test_bundled_config_names_accept_the_suffix():
    assert resolve_config("digits-5p.yaml").num_parties == resolve_config("digits-5p").num_parties == 5


def test_duplicate_keys_in_a_set_value(tmp_path, capsys):
    assert main(["run", "demo", *FAST, "--out", str(tmp_path / "r"), "--set", "params={b: 8, b: 9}"]) == 2
    assert "repeats a key" in _one_line(capsys)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_without_cuda_is_one_line(tmp_path, capsys):
    assert main(["run", "demo", *FAST, "--out", str(tmp_path / "r"), "--set", "train.device=cuda"]) == 2
    line = _one_line(capsys)
    assert "train.device: got 'cuda'" in line and "no CUDA device" in line and "'cpu'" in line
    assert not (tmp_path / "r").exists()


# ---- --out ------------------------------------------------------------------------------------
def test_out_that_is_a_file(tmp_path, capsys):
    f = tmp_path / "file"
    f.write_text("precious")
    assert main(["run", "demo", *FAST, "--out", str(f)]) == 2
    assert "--out:" in (line := _one_line(capsys)) and "is a file" in line
    assert f.read_text() == "precious"


def test_out_under_a_read_only_directory(tmp_path, capsys):
    if os.geteuid() == 0:  # root ignores permission bits: use a filesystem nobody may write
        target = "/sys/vfl-test-run"
    else:
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o555)
        target = str(ro / "run")
    assert main(["run", "demo", *FAST, "--out", target]) == 2
    line = _one_line(capsys)
    assert line.startswith("vfl: error: --out: cannot create run directory") and target in line


def test_out_that_holds_other_files_is_never_touched(tmp_path, capsys):
    out = tmp_path / "mine"
    (out / "plots").mkdir(parents=True)
    (out / "plots" / "accuracy.png").write_bytes(b"my figure")
    assert main(["run", "demo", *FAST, "--out", str(out)]) == 2
    line = _one_line(capsys)
    assert "is not empty (plots) and is not a vfl run" in line
    assert (out / "plots" / "accuracy.png").read_bytes() == b"my figure"
    assert sorted(p.name for p in out.iterdir()) == ["plots"]  # not even a lock file was added


def test_names_cannot_escape_runs(tmp_path):
    cfg = resolve_config("demo", ["name=../../x"])
    out = default_out_dir(cfg, root=tmp_path / "runs")
    assert out.parent == tmp_path / "runs" and "/" not in out.name and not out.name.startswith(".")
    assert out.name.startswith("_.._x-")


def test_default_names_are_unique_within_a_second():
    cfg = resolve_config("demo")
    names = {default_out_dir(cfg).name for _ in range(50)}
    assert len(names) == 50


# ---- cluster address ---------------------------------------------------------------------------
def test_address_without_port(tmp_path, capsys):
    assert main(["run", "demo", "--no-progress", "--out", str(tmp_path / "r"), "--address", "notahost"]) == 2
    assert "transport.address: got 'notahost'; expected HOST:PORT" in _one_line(capsys)


def test_address_where_nothing_listens_gives_up_in_time(tmp_path, capsys):
    code = main(["run", "demo", "--no-progress", "--out", str(tmp_path / "r"), "--address", "127.0.0.1:1",
                 "--set", "transport.connect_timeout_s=1"])
    line = _one_line(capsys)
    assert code == 1 and "cannot join Ray at 127.0.0.1:1" in line and "transport.connect_timeout_s" in line
    assert not (tmp_path / "r").exists()


def test_address_that_is_not_a_ray_head(tmp_path, capsys):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    conns: list = []

    def accept() -> None:  # until the test closes the socket
        with contextlib.suppress(OSError):
            for _ in range(8):
                conns.append(srv.accept())

    threading.Thread(target=accept, daemon=True).start()
    addr = f"127.0.0.1:{srv.getsockname()[1]}"
    try:
        code = main(["run", "demo", "--no-progress", "--out", str(tmp_path / "r"), "--address", addr,
                     "--set", "transport.connect_timeout_s=2"])
    finally:
        srv.close()
    line = _one_line(capsys)
    assert code == 1 and f"cannot join Ray at {addr}" in line and "not as a Ray head node" in line


# ---- other commands ----------------------------------------------------------------------------
def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    from vfl import __version__

    assert capsys.readouterr().out.strip() == f"vfl {__version__}"


ACCOUNT = ["account", "--mechanism", "pbm", "--b", "16", "--beta", "0.25", "--alpha", "2", "--epochs", "1",
           "--dim", "4"]


@pytest.mark.parametrize("extra,needle", [
    (["--parties", "1", "--delta", "1e-5"], "parties: got 1; must be an int >= 2"),
    (["--parties", "4", "--delta", "-1e-5"], "delta: got -1e-05; allowed: a value in (0, 1)"),
    (["--parties", "4", "--delta", "1.5"], "delta: got 1.5"),
])
def test_account_bad_values(extra, needle, capsys):
    assert main([*ACCOUNT, *extra]) == 2
    assert needle in _one_line(capsys)


@pytest.mark.parametrize("extra,flag", [
    (["--batch", "100", "--dataset-size", "1000"], "--batch"),                   # the epsilon ignores them
    (["--dataset-size", "1000"], "--dataset-size"),
    (["--mechanism", "ldp", "--c0", "1", "--batch", "10", "--dataset-size", "100"], "--batch"),  # paper's T is PBM's
])
def test_account_refuses_shape_flags_that_change_nothing(extra, flag, capsys):
    """--batch/--dataset-size only set the paper's T (Theorem 6.1 with --c0); elsewhere they used to be
    accepted and ignored (the same epsilon whatever their value)."""
    assert main([*ACCOUNT, "--parties", "4", "--delta", "1e-5", *extra]) == 2
    line = _one_line(capsys)
    assert line.count(flag) >= 1 and "--c0" in line
