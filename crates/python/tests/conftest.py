"""Shared fixtures of the etwgpu pytest suite.

The test data is the repository's ``test_data/`` (``ETWGPU_TEST_DATA``
overrides where it is). GPU tests skip when no adapter exists, unless
``GPU_TESTS=require`` (as CI sets), when a missing adapter fails them.
"""

import json
import os
from pathlib import Path

import numpy as np
import pytest

import etwgpu

TEST_DATA = Path(os.environ.get("ETWGPU_TEST_DATA", Path(__file__).resolve().parents[3] / "test_data"))
FIXTURES = TEST_DATA / "fixtures"
HOSTILE = TEST_DATA / "hostile"
TOKENIZERS = TEST_DATA / "tokenizers"


def fixture_names():
    return sorted(p.name for p in FIXTURES.iterdir() if (p / "manifest.json").exists())


def manifest(name):
    return json.loads((FIXTURES / name / "manifest.json").read_text())


def call_arrays(name, k, what):
    """The ``inputs`` or ``outputs`` of call ``k`` of fixture ``name``."""
    call = manifest(name)["calls"][k]
    return [np.load(FIXTURES / name / f) for f in call[what]]


@pytest.fixture(scope="session")
def rt():
    try:
        return etwgpu.Runtime.get()
    except etwgpu.DeviceError as e:
        if os.environ.get("GPU_TESTS") == "require":
            raise
        pytest.skip(f"no GPU adapter ({e}); set GPU_TESTS=require to fail instead")
