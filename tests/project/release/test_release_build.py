"""The release checks itself: both distributions build, their metadata is valid core metadata
(packaging's validator, the one PyPI's upload path uses), every one carries LICENSE, the
versions agree with the one version source (``airflow_samza_expand.__version__``), and the job
side's wheel carries no Airflow: no Airflow module and no Airflow requirement."""

from __future__ import annotations

import tarfile
import zipfile
from pathlib import Path

from packaging.metadata import Metadata
from packaging.requirements import Requirement
from release_helpers import REPO, Dists

from airflow_samza_expand import __version__
from airflow_samza_expand.get_provider_info import get_provider_info

LICENSE = (REPO / "LICENSE").read_bytes()


def wheel_files(wheel: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as z:
        return {name: z.read(name) for name in z.namelist()}


def sdist_files(sdist: Path) -> dict[str, bytes]:
    with tarfile.open(sdist) as t:
        return {
            m.name.split("/", 1)[1]: t.extractfile(m).read()  # type: ignore[union-attr]
            for m in t.getmembers()
            if m.isfile()
        }


def metadata(raw: bytes) -> Metadata:
    """Core metadata, validated (raises ExceptionGroup naming every invalid field)."""
    return Metadata.from_email(raw, validate=True)


def test_distributions_carry_valid_metadata_license_and_one_version(dists: Dists) -> None:
    assert "Apache License" in LICENSE.decode() and "Version 2.0" in LICENSE.decode()
    assert get_provider_info()["versions"][0] == __version__
    metas = {}
    for name, path in (("sdist", dists.sdist), ("runtime sdist", dists.runtime_sdist)):
        sdist = sdist_files(path)
        assert sdist["LICENSE"] == LICENSE, name
        assert path.name.endswith(f"-{__version__}.tar.gz"), path.name
        metas[name] = metadata(sdist["PKG-INFO"])
    for name, wheel in (("wheel", dists.wheel), ("runtime", dists.runtime_wheel)):
        files = wheel_files(wheel)
        dist_info = next(n.split("/")[0] for n in files if n.endswith(".dist-info/METADATA"))
        assert dist_info.endswith(f"-{__version__}.dist-info"), dist_info
        assert files[f"{dist_info}/licenses/LICENSE"] == LICENSE, name
        metas[name] = metadata(files[f"{dist_info}/METADATA"])
    for name, meta in metas.items():
        assert str(meta.version) == __version__, name
        assert meta.license_expression == "Apache-2.0", name
        assert meta.license_files == ["LICENSE"], name
        assert meta.description_content_type == "text/markdown", name
        assert meta.requires_python is not None and meta.requires_python.contains("3.11"), name
    assert metas["sdist"].name == metas["wheel"].name == "airflow-samza-expand"
    provider = {Requirement(str(r)).name for r in metas["wheel"].requires_dist or []}
    assert {"apache-airflow", "apache-airflow-providers-apache-kafka"} <= provider
    assert metas["runtime sdist"].name == metas["runtime"].name == "samza-expand-runtime"
    runtime = {Requirement(str(r)).name for r in metas["runtime"].requires_dist or []}
    assert runtime == {"confluent-kafka", "pyspark", "pandas", "pyarrow", "fsspec"}


def test_job_side_wheel_is_the_providers_modules_without_airflow(dists: Dists) -> None:
    """Same bytes as the provider's wheel for every module it carries (they cannot drift), and
    none of the Airflow surface, the example DAGs, the demo or the test tools. The job side's
    wheel is built from its sdist, so the sdist carries every module too."""
    provider = wheel_files(dists.wheel)
    runtime = {n: b for n, b in wheel_files(dists.runtime_wheel).items() if ".dist-info/" not in n}
    assert "airflow_samza_expand/spark/job.py" in runtime
    assert "airflow_samza_expand/spark/runtime.py" in runtime
    assert "airflow_samza_expand/examples/user_job.py" in runtime
    assert "airflow_samza_expand/store/_kafka.py" in runtime
    for name, content in runtime.items():
        assert provider.get(name) == content, f"{name} differs from the provider's wheel"
    left_out = ("airflow/", "dags/", "_demo/", "_testing/", "get_provider_info.py", "cli.py")
    assert not [n for n in runtime if n.removeprefix("airflow_samza_expand/").startswith(left_out)]
    # every package module of the provider's wheel outside those is in the job side's
    kept = {
        n
        for n in provider
        if n.startswith("airflow_samza_expand/")
        and not n.removeprefix("airflow_samza_expand/").startswith(left_out)
    }
    assert kept == set(runtime)


def test_the_images_install_the_two_distributions() -> None:
    """docker/: the Spark image installs the job side's distribution with its requirements
    (no ``--no-deps``), the Airflow image the provider with Airflow pinned next to it."""
    spark = (REPO / "docker" / "spark" / "Dockerfile").read_text()
    assert "pip install -c constraints.txt ./runtime" in spark
    assert "--no-deps" not in spark and "pip check" in spark
    airflow = (REPO / "docker" / "airflow" / "Dockerfile").read_text()
    assert 'pip install -c constraints.txt "apache-airflow==' in airflow
