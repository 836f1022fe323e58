"""testing.bytecode: a source zip gains its modules' .pyc, which zipimport then uses."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from airflow_samza_expand._testing.bytecode import compile_zip

MODULE = "def answer():\n    raise ValueError('from the zip')\n"


def _zip(path: Path, files: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        for name, text in files.items():
            z.writestr(zipfile.ZipInfo(name, (2024, 5, 17, 10, 30, 4)), text)
    return path


def _import_from(zip_path: Path) -> list[str]:
    code = (
        "import sys, traceback; sys.path.insert(0, sys.argv[1]); import pkg.mod as m\n"
        "print(m.__spec__.loader.get_filename('pkg.mod'))\n"
        "try:\n    m.answer()\nexcept ValueError:\n    print(traceback.format_exc())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(zip_path)], capture_output=True, text=True, check=True
    )
    return out.stdout.splitlines()


def test_a_compiled_zip_is_imported_from_its_bytecode_with_source_tracebacks(tmp_path):
    path = _zip(tmp_path / "lib.zip", {"pkg/__init__.py": "", "pkg/mod.py": MODULE})
    assert _import_from(path)[0].endswith("mod.py")  # before: compiled from source

    assert compile_zip(path) == 2
    names = zipfile.ZipFile(path).namelist()
    assert {"pkg/mod.py", "pkg/mod.pyc", "pkg/__init__.pyc"} <= set(names)
    lines = _import_from(path)
    assert lines[0].endswith("mod.pyc"), lines  # zipimport took the bytecode
    assert any("raise ValueError('from the zip')" in line for line in lines), lines
    assert compile_zip(path) == 0  # idempotent


def test_a_module_that_does_not_compile_is_left_to_its_source(tmp_path):
    path = _zip(tmp_path / "lib.zip", {"ok.py": "x = 1\n", "py2.py": "print 'old'\n"})
    assert compile_zip(path) == 1
    names = set(zipfile.ZipFile(path).namelist())
    assert "ok.pyc" in names and "py2.pyc" not in names
    assert compile_zip(path) == 0  # nothing left: the zip is not rewritten again
