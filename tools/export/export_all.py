#!/usr/bin/env python3
"""Regenerates every `.pte` fixture under test_data/fixtures/.

    python3 tools/export/export_all.py [--only NAME ...] [--list] [--no-verify]
                                       [--dump-vk DIR]

Needs the pinned packages of tools/export/requirements.txt. When they are not
importable and `.venv-export/` exists at the repository root, the script
re-runs itself with that venv's interpreter.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
VENV_PYTHON = REPO_ROOT / ".venv-export" / "bin" / "python"


def _ensure_environment() -> None:
    try:
        import executorch.exir  # noqa: F401
        import torch  # noqa: F401
    except ImportError:
        in_venv = Path(sys.prefix).resolve() == VENV_PYTHON.parents[1].resolve()
        if VENV_PYTHON.exists() and not in_venv:
            os.execv(str(VENV_PYTHON), [str(VENV_PYTHON), *sys.argv])
        sys.exit("executorch/torch not importable: see tools/export/README.md")


def _quiet() -> None:
    logging.disable(logging.WARNING)
    warnings.filterwarnings("ignore")


def _all_fixtures():
    import fixtures_families
    import fixtures_int64
    import fixtures_llama
    import fixtures_nn
    import fixtures_q8
    import fixtures_train

    registry = dict(fixtures_nn.FIXTURES)
    registry.update(fixtures_llama.FIXTURES)
    registry.update(fixtures_families.FIXTURES)
    registry.update(fixtures_int64.FIXTURES)
    registry.update(fixtures_q8.FIXTURES)
    registry.update(fixtures_train.FIXTURES)
    return registry


def _summary_line(manifest: dict) -> str:
    forward = next(m for m in manifest["expected"]["methods"] if m["name"] == "forward")
    ops: dict[str, int] = {}
    for d in forward["delegates"]:
        for op, n in d.get("ops", {}).items():
            ops[op] = ops.get(op, 0) + n
    ops_text = ", ".join(f"{op} x{n}" if n > 1 else op for op, n in sorted(ops.items()))
    kernels = forward["kernel_calls"]
    cpu = f" | CPU: {', '.join(kernels)}" if kernels else ""
    return f"{len(forward['delegates'])} delegate(s): {ops_text}{cpu}"


def main() -> int:
    _ensure_environment()
    sys.dont_write_bytecode = True   # keep tools/export free of __pycache__
    sys.path.insert(0, str(HERE))
    _quiet()

    import fixture_io

    registry = _all_fixtures()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", metavar="NAME", choices=sorted(registry),
                        help="export only this fixture (repeatable)")
    parser.add_argument("--list", action="store_true", help="list fixture names and exit")
    parser.add_argument("--no-verify", action="store_true",
                        help="skip the portable-CPU cross-check of the goldens")
    parser.add_argument("--dump-vk", type=Path, default=None,
                        help="write each VK00 graph as JSON under DIR/<fixture>/ (not committed)")
    parser.add_argument("--out", type=Path, default=fixture_io.FIXTURES_DIR,
                        help="fixtures root (default: test_data/fixtures)")
    args = parser.parse_args()

    if args.list:
        print("\n".join(registry))
        return 0

    names = args.only or list(registry)
    failures = []
    for name in names:
        start = time.time()
        print(f"[{name}] exporting ...", flush=True)
        try:
            result = registry[name](verify=not args.no_verify)
            dump = args.dump_vk / name if args.dump_vk else None
            manifest = fixture_io.write_fixture(result, args.out, dump)
        except Exception as exc:  # report and go on with the other fixtures
            failures.append((name, exc))
            print(f"[{name}] FAILED: {type(exc).__name__}: {exc}", flush=True)
            continue
        size = fixture_io.dir_size(args.out / name)
        print(f"[{name}] {size / 1024:.1f} KiB, {time.time() - start:.1f}s; "
              f"{_summary_line(manifest)}", flush=True)
        for note in result.notes:
            print(f"[{name}]   {note}", flush=True)

    total = fixture_io.dir_size(args.out) if args.out.exists() else 0
    print(f"total size of {args.out}: {total} bytes ({total / 2**20:.2f} MiB)")
    if failures:
        print("failed: " + ", ".join(n for n, _ in failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
