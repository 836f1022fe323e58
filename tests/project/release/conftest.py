"""The release's distributions, built once per session from this checkout
(tests/project/release)."""

from __future__ import annotations

import pytest
from release_helpers import Dists, build_dists


@pytest.fixture(scope="session")
def dists(tmp_path_factory: pytest.TempPathFactory) -> Dists:
    """The provider's sdist and wheel and the job side's wheel, as a release builds them."""
    return build_dists(tmp_path_factory.mktemp("dist"))
