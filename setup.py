"""Build trawl with its per-link and per-page modules compiled to C by mypyc.

These modules run for every link or every page of a crawl (the URL filter, the parser,
the seen-set, the host scheduler) and are plain, strictly typed Python, which mypyc
turns into C extensions from the same source. On the crawl benchmark the compiled
build needs 0.87-0.88x the CPU a page of the plain one (docs/PERFORMANCE.md). The sources
stay the reference: every module also runs as plain Python (``TRAWL_PURE=1`` builds
without compiling), and the tests run against the compiled build.

Two tables that every link candidate meets are written in C outright (``WRITTEN_IN_C``):
``trawl.frontier._idtable`` behind the seen-set's cache of confirmed ids
(trawl.frontier.known_ids) and ``trawl.frontier._inlink_counts`` behind the in-link
counter (trawl.frontier.inlinks); their 64-bit slots are what compiled Python can only
read as new int objects. Each has a reference in
Python (``known_ids._Generation``, ``inlinks._Counts``) that a build without compiling
uses. ``trawl.content._simhash``, the SimHash of a page's text (its words, BLAKE2b of
each shingle, the votes), is written in C too; its reference is trawl.content.simhash's
and trawl.content.text's Python.

``pip install .`` and ``pip wheel .`` compile them in pip's build environment, which
holds what pyproject.toml's ``[build-system]`` requires: mypy and every package whose
types a compiled module uses. mypy checks the compiled modules as strictly as
``make lint`` does; the modules they import without being compiled are only read for
their types (``MYPY_FLAGS``), since their own dependencies need not be in that
environment. Where no C compiler can build a Python extension, the build says so in
one line and installs the plain-Python modules alone. ``python setup.py build_ext
--inplace`` (``make setup``) compiles them next to their sources, which an editable
install then imports in their place.
"""

from __future__ import annotations

import contextlib
import functools
import os
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator

from setuptools import Distribution, Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import CCompilerError, ExecError, PlatformError

COMPILED = (
    "extract.resolution",
    "extract.urls",
    "extract.links",
    "extract.scope",
    "extract.parser",
    "freshness.recrawl",
    "frontier.seen",
    "frontier.known_ids",
    "frontier.inlinks",
    "politeness.slots",
    "politeness.scheduler",
)
"""Modules of trawl compiled by mypyc, named below the package (tests/conftest.py checks
they are current)."""

WRITTEN_IN_C = ("frontier._idtable", "frontier._inlink_counts", "content._simhash")
"""Modules of trawl written in C (``<name>.c``), each with a reference in Python."""

GROUP_LIBRARY = "trawl__mypyc"
"""The library beside the package that holds the code of every module mypyc compiles."""

MYPY_FLAGS = ("--follow-imports=silent",)
"""How mypyc's type check treats the modules the compiled ones import: their types are
read, their own errors (a dependency of theirs missing from the build environment)
are not reported. The compiled modules themselves are checked with pyproject.toml's
strict settings, and `make lint` checks every module."""

PURE = bool(os.environ.get("TRAWL_PURE"))
"""Build the plain-Python package only (``TRAWL_PURE=1``, as the Makefile's editable
install does)."""

BUILD_ERRORS = (CCompilerError, ExecError, PlatformError)
"""What a compiler that is missing or cannot build an extension raises."""

METADATA_COMMANDS = frozenset({"egg_info", "dist_info", "sdist"})
"""Commands that list the sources but build nothing (pip runs two before each build)."""

_PROBE = "#include <Python.h>\nint trawl_probe(void) { return 0; }\n"
"""A C file that builds where the compiler can build a Python extension."""


@contextlib.contextmanager
def _captured(path: str) -> Iterator[None]:
    """Send this process's and its children's output to the file ``path`` for a while."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with open(path, "wb") as sink:
        try:
            os.dup2(sink.fileno(), 1)
            os.dup2(sink.fileno(), 2)
            yield
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)


def _compiler_problem(command: build_ext) -> str | None:
    """Why no Python extension can be compiled here, or None when a small one compiles
    and links with the compiler ``command`` would use. The reason is the compiler's
    first error line (``fatal error: Python.h: No such file or directory``), else what
    running it came to (``gcc: No such file or directory``)."""
    from distutils.ccompiler import new_compiler
    from distutils.sysconfig import customize_compiler

    compiler = new_compiler(compiler=command.compiler)
    customize_compiler(compiler)
    paths = sysconfig.get_paths()
    with tempfile.TemporaryDirectory(prefix="trawl-probe-") as tmp:
        source, output = os.path.join(tmp, "probe.c"), os.path.join(tmp, "output")
        with open(source, "w", encoding="ascii") as handle:
            handle.write(_PROBE)
        try:
            with _captured(output):
                objects = compiler.compile(
                    [source], output_dir=tmp, include_dirs=[paths["include"], paths["platinclude"]]
                )
                compiler.link_shared_object(objects, os.path.join(tmp, "probe.so"))
        except BUILD_ERRORS as exc:
            with open(output, encoding="utf-8", errors="replace") as handle:
                errors = [line for line in handle if "error:" in line]
            return errors[0][errors[0].index("error:") :].strip() if errors else _failure(exc)
    return None


def _failure(exc: BaseException) -> str:
    """What running the compiler came to, in a few words (``gcc: No such file or
    directory``, ``/bin/false exited with status 1``), from the error that began it."""
    while exc.__cause__ or exc.__context__:
        exc = exc.__cause__ or exc.__context__ or exc
    if isinstance(exc, subprocess.CalledProcessError):
        command = exc.cmd if isinstance(exc.cmd, str) else exc.cmd[0]
        return f"{command} exited with status {exc.returncode}"
    if isinstance(exc, OSError) and exc.filename:
        return f"{exc.filename}: {exc.strerror}"
    return str(exc)


def _fall_back(reason: str) -> None:
    """Say, in one line, that this install is the plain-Python build and why.

    pip shows a build's output only when the build fails (or with ``-v``), so the line
    also goes to the terminal the install runs in, if there is one.
    """
    notice = f"trawl: {reason}; installing the pure-Python build (slower)"
    print(notice, file=sys.stderr, flush=True)
    if sys.stderr.isatty():
        return
    with contextlib.suppress(OSError), open("/dev/tty", "w", encoding="utf-8") as tty:
        tty.write(f"\n{notice}\n")


def _source(name: str, suffix: str) -> str:
    """The source file of the module ``name`` (``extract.urls``) of trawl."""
    return os.path.join("src", "trawl", *name.split(".")) + suffix


@functools.cache
def _extensions() -> list[Extension]:
    """The compiled modules: those written in C, then mypyc's (after its strict type
    check), whose library takes most of the build's time."""
    from mypyc.build import mypycify

    paths = [_source(name, ".py") for name in COMPILED]
    written = [Extension(f"trawl.{name}", [_source(name, ".c")]) for name in WRITTEN_IN_C]
    return [*written, *mypycify([*MYPY_FLAGS, *paths], opt_level="3", group_name="trawl")]


class BuildExt(build_ext):
    """Compile the extensions when a C compiler can, else build nothing and say so.

    The extensions are made (mypyc's type check and C output) only for a command that
    builds, not each time pip asks setup.py for metadata. Where compiling is not possible,
    or fails part way, no compiled module is left in the build: a stale or partial one
    would be imported in place of its source.
    """

    extensions: list[Extension]
    _building = ""
    """The extension being compiled, for the notice if compiling it fails."""

    def finalize_options(self) -> None:
        building = not set(self.distribution.commands) <= METADATA_COMMANDS
        if building and not PURE and not self.distribution.ext_modules:
            problem = _compiler_problem(self)
            if problem is None:
                self.distribution.ext_modules = _extensions()
            else:
                _fall_back(f"no working C compiler here ({problem})")
        super().finalize_options()

    def get_source_files(self) -> list[str]:
        """The sources of the compiled modules, known without making the extensions."""
        return [_source(name, ".py") for name in COMPILED] + [
            _source(name, ".c") for name in WRITTEN_IN_C
        ]

    def run(self) -> None:
        if not self.extensions:
            self._remove_outputs()
            return
        try:
            super().run()
        except BUILD_ERRORS:
            self._remove_outputs()
            self.extensions = []
            _fall_back(f"compiling {self._building} failed")

    def build_extension(self, ext: Extension) -> None:
        self._building = ext.name
        super().build_extension(ext)

    def _remove_outputs(self) -> None:
        """Delete every compiled module this build or an earlier one could have left."""
        names = [f"trawl.{name}" for name in (*COMPILED, *WRITTEN_IN_C)]
        for name in [*names, GROUP_LIBRARY]:
            with contextlib.suppress(FileNotFoundError):
                os.remove(self.get_ext_fullpath(name))


class BinaryDistribution(Distribution):
    """A distribution with compiled modules unless ``TRAWL_PURE``, known before they are
    made: pip's wheel is then platform-specific and installs into platlib."""

    def has_ext_modules(self) -> bool:
        return not PURE


setup(distclass=BinaryDistribution, cmdclass={"build_ext": BuildExt})
