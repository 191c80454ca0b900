"""Generates the SCIP bindings (codewhere/precise/scip_pb2.py) from the published schema at build
time, with protoc from grpcio-tools; everything else is declared in pyproject.toml."""

from __future__ import annotations

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

PRECISE = Path(__file__).parent / "src" / "codewhere" / "precise"


def generate_scip_bindings() -> None:
    from grpc_tools import protoc  # a build requirement (pyproject.toml)

    proto = PRECISE / "scip.proto"
    target = PRECISE / "scip_pb2.py"
    if target.exists() and target.stat().st_mtime >= proto.stat().st_mtime:
        return
    status = protoc.main(["grpc_tools.protoc", f"-I{PRECISE}", f"--python_out={PRECISE}", str(proto)])
    if status != 0:
        raise SystemExit(f"protoc could not compile {proto} (exit {status})")


class BuildWithBindings(build_py):
    def run(self) -> None:
        generate_scip_bindings()  # into the source tree, so editable installs find it too
        super().run()


setup(cmdclass={"build_py": BuildWithBindings})
