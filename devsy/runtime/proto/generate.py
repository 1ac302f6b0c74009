"""Regenerate the committed Python bindings of the Runtime Protocol: `python -m devsy.runtime.proto.generate`.

The bindings are committed so a plain install needs no code generator; a test regenerates them into a temporary
directory with the pinned grpcio-tools and compares bytes, so a .proto edit without regeneration cannot land.
Output layout follows the proto paths: devsy/runtime/v1/runtime.proto -> devsy/runtime/v1/runtime_pb2.py.
"""

from __future__ import annotations

import argparse
import sys
from importlib import metadata, resources
from pathlib import Path

# The generator version is part of the bytes we commit; bump it together with a regeneration.
GRPCIO_TOOLS_VERSION = "1.85.1"

PROTO_ROOT = Path(__file__).resolve().parent
REPO_ROOT = PROTO_ROOT.parents[2]
PROTO_FILES = (
    "devsy/runtime/v1/runtime.proto",
    "devsy/runtime/goplugin/grpc_controller.proto",
    "devsy/runtime/goplugin/grpc_stdio.proto",
)


class GeneratorError(RuntimeError):
    pass


def generated_files(out: Path) -> list[Path]:
    """Every file the generator writes under `out`, sorted."""
    files = []
    for proto in PROTO_FILES:
        stem = out / proto[: -len(".proto")]
        files += [Path(f"{stem}_pb2.py"), Path(f"{stem}_pb2.pyi"), Path(f"{stem}_pb2_grpc.py")]
    return sorted(files)


def generate(out: Path = REPO_ROOT) -> list[Path]:
    """Run protoc (from grpcio-tools) on every proto, writing bindings under `out`; returns the files written."""
    try:
        from grpc_tools import protoc
    except ImportError as exc:
        raise GeneratorError(f"grpcio-tools is not installed; install it with pip install "
                             f"'grpcio-tools=={GRPCIO_TOOLS_VERSION}' (the dev extra)") from exc
    installed = metadata.version("grpcio-tools")
    if installed != GRPCIO_TOOLS_VERSION:
        raise GeneratorError(f"grpcio-tools {installed} is installed but the bindings are pinned to "
                             f"{GRPCIO_TOOLS_VERSION}; install that version (the dev extra) and rerun")
    well_known = resources.files("grpc_tools") / "_proto"
    args = [
        "grpc_tools.protoc", f"-I{PROTO_ROOT}", f"-I{well_known}",
        f"--python_out={out}", f"--pyi_out={out}", f"--grpc_python_out={out}",
        *(str(PROTO_ROOT / p) for p in PROTO_FILES),
    ]
    if protoc.main(args) != 0:
        raise GeneratorError("protoc failed; its message is above")
    return generated_files(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devsy.runtime.proto.generate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=REPO_ROOT, help="output root (default: the repository root)")
    args = parser.parse_args(argv)
    try:
        for path in generate(args.out):
            print(path)
    except GeneratorError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
