"""Shared fixtures of the tessera package's tests: the CLI, the digits model and its reference run.

Environment (set by the CTest python_api): TSR_CLI (the `tessera` program), TSR_DIGITS (the
directory the digits_model target fills: digits_qdq.onnx, test_x.npy, test_y.npy).
"""
import json
import os
import subprocess

import numpy as np
import pytest

import tessera


def _need(var):
    v = os.environ.get(var)
    if not v:
        pytest.skip("%s is not set (run through ctest -R python_api)" % var)
    return v


@pytest.fixture(scope="session")
def cli():
    return _need("TSR_CLI")


@pytest.fixture(scope="session")
def digits():
    d = _need("TSR_DIGITS")
    return {k: os.path.join(d, f) for k, f in (("qdq", "digits_qdq.onnx"), ("qlinear", "digits_qlinear.onnx"),
                                               ("x", "test_x.npy"), ("y", "test_y.npy"))}


@pytest.fixture(scope="session")
def digits_cli(cli, digits, tmp_path_factory):
    """`tessera infer` on the QDQ digits model: its output array, its printed text, its placement JSON."""
    d = tmp_path_factory.mktemp("cli")
    out, pj = str(d / "out.npy"), str(d / "placement.json")
    r = subprocess.run([cli, "infer", digits["qdq"], "-i", digits["x"], "-o", out, "--labels", digits["y"],
                        "--placement-json", pj], capture_output=True, text=True, check=True)
    with open(pj) as f:
        placement = json.load(f)
    return np.load(out), r.stdout, placement


@pytest.fixture
def dev():
    with tessera.Device("default", backend="fsim") as d:
        yield d


@pytest.fixture(scope="session")
def resnet18_small(tmp_path_factory):
    """ResNet-18 (small variant, as CTest onnx_resnet18_small) as a QDQ ONNX model and its input."""
    nd = _need("TSR_NETDUMP")
    d = tmp_path_factory.mktemp("resnet18")
    src = os.path.join(os.path.dirname(__file__), "..", "..")
    subprocess.run([nd, str(d), "--seed", "7", "--backend", "fsim", "--small", "32,16,10"], check=True,
                   capture_output=True)
    subprocess.run(["/usr/bin/python3", os.path.join(src, "scripts", "onnx", "resnet18_onnx.py"), str(d)],
                   check=True, capture_output=True)
    return str(d / "resnet18_qdq.onnx"), str(d / "input0.npy")
