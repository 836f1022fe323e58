"""Compiled bytecode for every Python process the suite and the demo start.

Each Airflow task process, DAG run, Spark driver, Python worker and data-source runner imports
hundreds of modules. Without ``.pyc`` files it compiles them from source at every start: uv
installs without bytecode, and a ``PYTHONDONTWRITEBYTECODE=1`` environment (common in CI
images) never writes the cache back. `scripts/setup.sh` therefore installs with uv's
``--compile-bytecode`` and then runs this module:

* `compile_site_packages` - once per environment (a stamp file), for packages installed before
  setup asked uv to compile;
* `compile_tree` - the checkout's own packages (an editable install is not compiled by uv);
* `compile_zip` - pyspark's ``pyspark.zip`` and py4j's source zip: Spark puts them first on
  the ``PYTHONPATH`` of every Python process it starts, and ``zipimport`` compiles a module
  from source unless the archive holds its ``.pyc``. The ``.pyc`` entries are added beside the
  sources (timestamp-checked against them, as ``zipimport`` does); an interpreter of another
  version ignores them (magic number) and compiles as before.

Measured on the e2e expansion test: an Airflow + Spark + pandas import costs 2.1 instead of
5.3 CPU-s per process. ``python -m airflow_samza_expand._testing.bytecode [DIR...]`` does all three
for the running interpreter's environment and the given source trees; idempotent.
"""

from __future__ import annotations

import compileall
import importlib.util
import os
import sys
import sysconfig
import time
import zipfile
from pathlib import Path


def _timestamp_pyc(code: object, mtime: int, size: int) -> bytes:
    """A timestamp-based ``.pyc`` (PEP 552 flags 0), as ``py_compile`` writes one."""
    import marshal

    header = importlib.util.MAGIC_NUMBER + (0).to_bytes(4, "little")
    return (
        header
        + (mtime & 0xFFFFFFFF).to_bytes(4, "little")
        + (size & 0xFFFFFFFF).to_bytes(4, "little")
        + marshal.dumps(code)
    )


def _zip_mtime(info: zipfile.ZipInfo) -> int:
    """The source mtime ``zipimport`` derives from an entry's DOS date and time."""
    return int(time.mktime((*info.date_time, -1, -1, -1)))


def compile_zip(path: Path) -> int:
    """Add a ``.pyc`` beside each ``.py`` of the zip at ``path`` (atomically replaced); the
    number of modules compiled, 0 when there is nothing left to compile (a module that does
    not compile with this interpreter stays source only)."""
    with zipfile.ZipFile(path) as src:
        names = set(src.namelist())
        compiled: dict[str, tuple[zipfile.ZipInfo, bytes]] = {}
        for info in src.infolist():
            if not info.filename.endswith(".py") or info.filename + "c" in names:
                continue
            try:
                code = compile(src.read(info), str(path / info.filename), "exec", dont_inherit=True)
            except SyntaxError:
                continue
            pyc = zipfile.ZipInfo(info.filename + "c", info.date_time)
            pyc.compress_type = zipfile.ZIP_DEFLATED
            compiled[info.filename] = (pyc, _timestamp_pyc(code, _zip_mtime(info), info.file_size))
        if not compiled:
            return 0
        tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
        try:
            with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as dst:
                for info in src.infolist():
                    dst.writestr(info, src.read(info))
                    if info.filename in compiled:
                        dst.writestr(*compiled[info.filename])
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
    return len(compiled)


def spark_python_zips() -> list[Path]:
    """The zips Spark puts on its Python processes' path (installed pyspark), if any."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.origin:
        return []
    lib = Path(spec.origin).parent / "python" / "lib"
    return sorted(lib.glob("*.zip")) if lib.is_dir() else []


def compile_tree(directory: Path) -> bool:
    """``compileall`` of one source tree (quiet; up-to-date files are skipped)."""
    return bool(compileall.compile_dir(str(directory), quiet=1, workers=0))


def compile_site_packages() -> bool:
    """``compileall`` of this environment's site-packages, once (stamp ``.samza-bytecode``)."""
    site = Path(sysconfig.get_paths()["purelib"])
    stamp = Path(sys.prefix) / ".samza-bytecode"
    if stamp.exists():
        return True
    print(f"[bytecode] compiling {site} once (later installs are compiled by uv)", flush=True)
    ok = compile_tree(site)
    stamp.write_text(f"{sys.version}\n")
    return ok


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    compile_site_packages()  # a file that does not compile (another Python's) is not fatal
    for zip_path in spark_python_zips():
        compiled = compile_zip(zip_path)
        if compiled:
            print(f"[bytecode] {zip_path.name}: {compiled} modules compiled into the archive")
    ok = all(compile_tree(Path(d)) for d in args)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
