"""Packs the extension module CI has already built into the wheel maturin
would make, without building it again.

``maturin build`` compiles the crate alone (``cargo rustc -p
etwgpu-python``), whose dependency features differ from the workspace's
(dev-dependencies and other members enable more), so in CI it would rebuild
wgpu, naga and every proc macro. CI instead builds the extension module in
the workspace build it has already done (``cargo build --workspace --lib
--tests``), and this script packs that library with the Python sources and
the ``.dist-info`` that ``maturin pep517 write-dist-info`` writes from
``pyproject.toml`` and ``Cargo.toml``: the same files, names and tags as
``maturin build``'s wheel.

    python ci/wheel_from_build.py --library target/debug/lib_etwgpu.so --out DIR
"""

import argparse
import base64
import hashlib
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]


def record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--library", required=True, type=Path, help="the built cdylib (lib_etwgpu.so)")
    ap.add_argument("--out", required=True, type=Path, help="directory for the wheel")
    ap.add_argument("--maturin", default="maturin", help="the maturin executable")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [args.maturin, "pep517", "write-dist-info", "--metadata-directory", tmp],
            cwd=PACKAGE,
            check=True,
        )
        (dist_info,) = Path(tmp).glob("*.dist-info")
        wheel_meta = (dist_info / "WHEEL").read_text()
        tags = [line.split(":", 1)[1].strip() for line in wheel_meta.splitlines() if line.startswith("Tag:")]
        if len(tags) != 1:
            sys.exit(f"expected one Tag in {dist_info / 'WHEEL'}, found {tags}")
        files = {}
        for path in sorted((PACKAGE / "python").rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                files[path.relative_to(PACKAGE / "python").as_posix()] = path.read_bytes()
        suffix = ".pyd" if sys.platform == "win32" else ".abi3.so"
        files[f"etwgpu/_etwgpu{suffix}"] = args.library.read_bytes()
        for path in sorted(dist_info.rglob("*")):
            if path.is_file():
                files[f"{dist_info.name}/{path.relative_to(dist_info).as_posix()}"] = path.read_bytes()
        record_name = f"{dist_info.name}/RECORD"
        record = [record_line(n, d) for n, d in files.items()] + [f"{record_name},,"]
        files[record_name] = ("\n".join(record) + "\n").encode()
        name_version = dist_info.name.removesuffix(".dist-info")
        args.out.mkdir(parents=True, exist_ok=True)
        wheel = args.out / f"{name_version}-{tags[0]}.whl"
        with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as z:
            for n, d in files.items():
                info = zipfile.ZipInfo(n, date_time=(2020, 1, 1, 0, 0, 0))
                info.external_attr = (0o755 if n.endswith(suffix) else 0o644) << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                z.writestr(info, d)
    print(wheel)
    return 0


if __name__ == "__main__":
    sys.exit(main())
