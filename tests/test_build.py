"""How pip builds trawl (setup.py, pyproject.toml): what mypyc's type check needs in pip's
build environment, and a machine without a C compiler, where the build is plain Python
and says so in one line. Each build here runs setuptools' build backend, as pip does, on
a copy of the source. .ci/install-check builds and uses a real wheel from a clean venv.
"""

from __future__ import annotations

import ast
import importlib.metadata
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).parent.parent
EXTENSION = sysconfig.get_config_var("EXT_SUFFIX")
BUILD_LIB = Path("build", f"lib.{sysconfig.get_platform()}-{sys.implementation.cache_tag}")
"""Where setuptools puts what a build makes, the wheel's contents."""
NOTICE = "trawl: {}; installing the pure-Python build (slower)"
"""The line a build without compiling prints."""


def _compiled() -> tuple[str, ...]:
    """setup.py's ``COMPILED``: the modules mypyc compiles."""
    for node in ast.parse((ROOT / "setup.py").read_text()).body:
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "COMPILED":
            names = ast.literal_eval(node.value)
            assert isinstance(names, tuple)
            return tuple(str(name) for name in names)
    raise AssertionError("setup.py has no COMPILED")


def _imported_packages(module: str) -> set[str]:
    """The top-level names of what ``trawl.<module>`` imports from outside trawl and the
    standard library."""
    tree = ast.parse(
        ROOT.joinpath("src", "trawl", *module.split(".")).with_suffix(".py").read_text()
    )
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.partition(".")[0])
    return names - set(sys.stdlib_module_names) - {"trawl", "__future__"}


def _requirements(specs: list[str]) -> dict[str, Requirement]:
    return {canonicalize_name(r.name): r for r in map(Requirement, specs)}


def test_the_build_environment_has_every_package_a_compiled_module_imports() -> None:
    """mypyc type-checks a module before compiling it, in pip's isolated environment:
    a package missing there leaves the module's use of it untyped, which the strict
    check rejects (ada-url's ``no-any-return`` in trawl.extract.resolution)."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    requires = _requirements(pyproject["build-system"]["requires"])
    depends = _requirements(pyproject["project"]["dependencies"])
    distributions = importlib.metadata.packages_distributions()
    needed = {
        canonicalize_name(distributions[package][0])
        for module in _compiled()
        for package in _imported_packages(module)
    }
    assert {"ada-url", "selectolax"} <= needed
    for name in sorted(needed):
        assert name in requires, f"{name} is not in [build-system] requires"
        assert requires[name].specifier == depends[name].specifier, name


def _source_copy(tmp_path: Path) -> Path:
    """What a clean checkout holds for the build, with no compiled module in it."""
    tree = tmp_path / "checkout"
    tree.mkdir()
    for name in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tree / name)
    shutil.copytree(
        ROOT / "src",
        tree / "src",
        ignore=shutil.ignore_patterns("*.so", "__pycache__", "*.egg-info"),
    )
    return tree


def _build_wheel(tree: Path, **env: str) -> tuple[list[str], list[str]]:
    """Build a wheel of ``tree`` as pip's build step does, with ``env`` added to this
    environment (less TRAWL_PURE and PYTHONPATH); the wheel's file names and the build's
    lines saying it is plain Python."""
    environ = {k: v for k, v in os.environ.items() if k not in {"TRAWL_PURE", "PYTHONPATH"}}
    hook = "import sys, setuptools.build_meta as b; b.build_wheel(sys.argv[1])"
    built = subprocess.run(
        [sys.executable, "-c", hook, str(tree / "dist")],
        cwd=tree,
        env={**environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        start_new_session=True,  # no terminal, where the notice would go too
    )
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (tree / "dist").glob("trawl-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    output = (built.stdout + built.stderr).splitlines()
    return names, [line for line in output if line.startswith("trawl:")]


@pytest.mark.parametrize("missing", ["CC fails", "no compiler on PATH"])
def test_without_a_c_compiler_the_wheel_is_plain_python_and_says_so_once(
    tmp_path: Path, missing: str
) -> None:
    tree = _source_copy(tmp_path)
    # What an earlier compiled build left where the wheel is assembled.
    lib = tree / BUILD_LIB
    for path in (lib / "trawl/extract" / f"urls{EXTENSION}", lib / f"trawl__mypyc{EXTENSION}"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"\x7fELF stale")
    if missing == "CC fails":
        env = {"CC": "/bin/false"}
        reason = "/bin/false exited with status 1"
    else:
        (tmp_path / "bin").mkdir()
        env = {"PATH": str(tmp_path / "bin")}
        reason = f"{shlex.split(sysconfig.get_config_var('CC'))[0]}: No such file or directory"
    names, notices = _build_wheel(tree, **env)
    assert notices == [NOTICE.format(f"no working C compiler here ({reason})")]
    assert {f"trawl/{name.replace('.', '/')}.py" for name in _compiled()} <= set(names)
    assert not any(name.endswith(".so") for name in names)


def test_a_build_that_fails_part_way_leaves_no_compiled_module(tmp_path: Path) -> None:
    """The modules written in C compile, mypyc's library does not: the wheel holds none
    of them, since a compiled module is imported in place of its source."""
    tree = _source_copy(tmp_path)
    compiler = shlex.split(sysconfig.get_config_var("CC"))[0]
    refusing = tmp_path / "cc"
    refusing.write_text(
        "#!/bin/sh\n"
        'case "$*" in *" -c build/"*) echo "cc: refused" >&2; exit 1;; esac\n'
        f'exec {compiler} "$@"\n'
    )
    refusing.chmod(0o755)
    names, notices = _build_wheel(tree, CC=str(refusing))
    assert notices == [NOTICE.format("compiling trawl__mypyc failed")]
    assert list(tree.glob("build/temp.*/src/trawl/frontier/_idtable.o")), (
        "the C modules were not compiled"
    )
    assert not list(tree.glob(f"{BUILD_LIB}/**/*.so"))
    assert "trawl/frontier/_idtable.pyi" in names
    assert not any(name.endswith(".so") for name in names)
