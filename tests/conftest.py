"""Root fixtures: Kafka for tests - the development broker, Apache Kafka, or a real cluster.

* Which Kafka: `--kafka=dev|apache` (or SAMZA_EXPAND_TEST_KAFKA; default `dev`, the light
  embedded development broker; `apache` starts Apache Kafka itself, fetched with Maven from
  Maven Central once, see airflow_samza_expand/_testing/apache_kafka_process.py).
  KAFKA_BOOTSTRAP_SERVERS, when set, wins over both (an outside cluster).
* `kafka_bootstrap` (session): bootstrap servers of the Kafka the tests use; the selected broker
  is started once per session on a free 127.0.0.1 port and stopped by pid at session end.
* `dev_broker`: the development broker handle (`.bootstrap`, `.faults`, `.log_text()`) when it
  is the Kafka of the run; skipped otherwise. Fault rules are cleared after each test.
* `dev_broker_server` / `apache_kafka_server` (session): each broker on demand, whatever the
  selection (the conformance suite runs on both side by side).
* `unique_topic`: factory `unique_topic(prefix="t") -> str` of collision-free topic names.

Tests that use these fixtures are marked `kafka`; tests that use `dev_broker` also `dev_broker`;
tests in the folders of APACHE_CI_DIRS (below) also `apache_ci` (the part scripts/test.sh runs
on Apache Kafka; tests/integration/cluster starts its own three-node cluster, marker
`kafka_cluster`). The folders mirror the package (docs/testing.md "The layout").
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from airflow_samza_expand._testing import session_sweep

log = logging.getLogger(__name__)

# Every process this run starts carries the marker; the watchdog and the session finish kill
# what is left of them (detached Spark jobs included), also after a SIGKILL of pytest.
SESSION_MARKER = session_sweep.mark_session()
_watchdog: list[object] = []

KAFKA_FIXTURES = {
    "kafka_bootstrap", "dev_broker", "unique_topic", "dev_broker_server", "apache_kafka_server",
}  # fmt: skip
KAFKA_CHOICES = ("dev", "apache")
KAFKA_ENV = "SAMZA_EXPAND_TEST_KAFKA"
# Run on Apache Kafka by scripts/test.sh (the rest runs on the development broker): the tests whose
# subject is Kafka itself or Airflow against it. A folder inside one of these that runs on the
# development broker is in DEV_CI_DIRS (the UI's tests: their subject is the page, not Kafka).
APACHE_CI_DIRS = (
    "airflow", "demo", "e2e", "integration/cluster", "kafka", "protocol/barrier", "store",
    "testing/conformance",
)  # fmt: skip
DEV_CI_DIRS = ("airflow/ui",)


def runs_on_apache_kafka(relative: Path) -> bool:
    """Whether the test file at ``relative`` (to tests/) is in scripts/test.sh's Apache part."""
    def under(folders: tuple[str, ...]) -> bool:
        return any(relative.is_relative_to(folder) for folder in folders)

    return under(APACHE_CI_DIRS) and not under(DEV_CI_DIRS)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--kafka",
        choices=KAFKA_CHOICES,
        default=None,
        help=f"Kafka of the tests: dev (development broker, default) or apache (Apache Kafka "
        f"from Maven Central); default ${KAFKA_ENV}; KAFKA_BOOTSTRAP_SERVERS wins over both",
    )
    parser.addoption(
        "--skip-budget",
        metavar="ALLOWLIST",
        default=None,
        help="fail the run when a test skips that is not on this list of node ids (CI: "
        "scripts/test_part.sh passes tests/skip_allowlist.txt)",
    )


def pytest_configure(config: pytest.Config) -> None:
    session_sweep.remove_stale_homes()  # Airflow homes of runs that were killed
    watchdog = session_sweep.start_watchdog(SESSION_MARKER)
    if watchdog is not None:
        _watchdog.append(watchdog)


def pytest_sessionfinish(session: pytest.Session) -> None:
    enforce_skip_budget(session)
    spare = frozenset(int(w.pid) for w in _watchdog)  # type: ignore[attr-defined]
    left = session_sweep.sweep(SESSION_MARKER, spare=spare)
    if left:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        message = f"killed {len(left)} process(es) the tests left running: pids {left}"
        log.warning(message)
        if reporter is not None:
            reporter.write_line(f"WARNING: {message}", yellow=True)


# -- the skip budget: in CI a test may skip only if tests/skip_allowlist.txt names it ----------

_skipped: list[tuple[str, str]] = []  # (node id, reason) of every skip of this run


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and not hasattr(report, "wasxfail"):  # an xfail is not a skip
        _skipped.append((report.nodeid, _skip_reason(report)))


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.skipped:  # a whole module skipped (importorskip, a module-level skip)
        _skipped.append((report.nodeid, _skip_reason(report)))


def _skip_reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    longrepr = report.longrepr
    return str(longrepr[2]) if isinstance(longrepr, tuple) else str(longrepr)


def read_skip_allowlist(path: Path) -> list[str]:
    """The node ids of an allow-list file: one per line, ``#`` starts a comment."""
    entries = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return [entry for entry in entries if entry]


def skip_allowed(nodeid: str, allowed: list[str]) -> bool:
    """An entry names a test, all parametrizations of one (``name`` for ``name[...]``), a class
    or a file (``path`` for ``path::...``)."""
    return any(nodeid == a or nodeid.startswith((f"{a}::", f"{a}[")) for a in allowed)


def enforce_skip_budget(session: pytest.Session) -> None:
    """With --skip-budget: a skip not on the list fails the run (exit 1), each one named."""
    listed = session.config.getoption("--skip-budget")
    if not listed:
        return
    allowed = read_skip_allowlist(Path(session.config.rootpath, listed))
    unexpected = sorted({(n, r) for n, r in _skipped if not skip_allowed(n, allowed)})
    if not unexpected:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    lines = [
        f"skip budget: {len(unexpected)} test(s) skipped that {listed} does not allow - "
        "install what they need (scripts/setup.sh) or list them there with the reason:"
    ]
    lines += [f"  {nodeid}: {reason}" for nodeid, reason in unexpected]
    for line in lines:
        if reporter is not None:
            reporter.write_line(line, red=True)
        else:
            print(line)
    if session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def selected_kafka(config: pytest.Config) -> str:
    """`dev` or `apache`: --kafka, else $SAMZA_EXPAND_TEST_KAFKA, else dev."""
    choice = config.getoption("--kafka") or os.environ.get(KAFKA_ENV) or "dev"
    if choice not in KAFKA_CHOICES:
        raise pytest.UsageError(f"{KAFKA_ENV}={choice!r}: use one of {', '.join(KAFKA_CHOICES)}")
    return choice


def real_cluster_bootstrap() -> str | None:
    """KAFKA_BOOTSTRAP_SERVERS if the tests run against a real cluster, else None."""
    return os.environ.get("KAFKA_BOOTSTRAP_SERVERS") or None


def pytest_report_header(config: pytest.Config) -> str:
    real = real_cluster_bootstrap()
    return f"kafka: {real + ' (KAFKA_BOOTSTRAP_SERVERS)' if real else selected_kafka(config)}"


@pytest.fixture(scope="session")
def dev_broker_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """The development broker, started on first use whatever Kafka the run selected."""
    from airflow_samza_expand._testing import DevBrokerProcess

    log_path = tmp_path_factory.mktemp("dev-broker") / "broker.log"
    broker = DevBrokerProcess(log_path=log_path)
    broker.start()
    try:
        yield broker
    finally:
        broker.close()


@pytest.fixture(scope="session")
def apache_kafka_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[object]:
    """Apache Kafka (KRaft, one node on loopback), started on first use. Skips when neither its
    cached jars nor Maven are there (unless --kafka=apache asked for it: then it fails)."""
    from airflow_samza_expand._testing import ApacheKafkaProcess
    from airflow_samza_expand._testing.apache_kafka_process import cached_libs

    wanted = selected_kafka(request.config) == "apache" and not real_cluster_bootstrap()
    if cached_libs() is None and not shutil.which("mvn") and not wanted:
        pytest.skip("Apache Kafka needs Maven (mvn) to fetch it once - apt-get install maven")
    log_path = Path(tmp_path_factory.mktemp("apache-kafka")) / "kafka.log"
    kafka = ApacheKafkaProcess(log_path=log_path)
    kafka.start()
    try:
        yield kafka
    finally:
        kafka.close()


@pytest.fixture
def restartable_apache_kafka(tmp_path: Path) -> Iterator[object]:
    """An Apache Kafka of the test's own, on a data directory under ``tmp_path``, so that the
    test can stop it and start it again on the same ports and data (an outage, a restart)."""
    from airflow_samza_expand._testing import ApacheKafkaProcess
    from airflow_samza_expand._testing.apache_kafka_process import cached_libs

    if cached_libs() is None:
        pytest.skip("Apache Kafka's jars are not fetched - run scripts/setup.sh")
    kafka = ApacheKafkaProcess(data_dir=tmp_path / "kafka-data", log_path=tmp_path / "kafka.log")
    kafka.start()
    try:
        yield kafka
    finally:
        kafka.close()


@pytest.fixture(scope="session")
def _dev_broker_process(request: pytest.FixtureRequest) -> object | None:
    """The development broker when it is the Kafka of this run, else None."""
    if real_cluster_bootstrap() or selected_kafka(request.config) != "dev":
        return None
    return request.getfixturevalue("dev_broker_server")


@pytest.fixture(scope="session")
def kafka_bootstrap(request: pytest.FixtureRequest) -> str:
    """Bootstrap servers of the Kafka the tests use."""
    real = real_cluster_bootstrap()
    if real:
        return real
    if selected_kafka(request.config) == "apache":
        return request.getfixturevalue("apache_kafka_server").bootstrap
    return request.getfixturevalue("dev_broker_server").bootstrap


@pytest.fixture
def dev_broker(_dev_broker_process: object | None) -> Iterator[object]:
    """The development broker (`.bootstrap`, `.faults`); skipped on any other Kafka."""
    if _dev_broker_process is None:
        pytest.skip("needs the development broker (this run uses another Kafka)")
    try:
        yield _dev_broker_process
    finally:
        if _dev_broker_process.proc is not None:  # type: ignore[attr-defined]
            _dev_broker_process.faults.clear()  # type: ignore[attr-defined]


@pytest.fixture
def unique_topic(request: pytest.FixtureRequest) -> Callable[..., str]:
    """Factory of collision-free topic names: unique_topic("orders") -> "orders-<test>-<hex>"."""
    test = re.sub(r"[^a-zA-Z0-9]+", "-", request.node.name).strip("-")[:60]

    def make(prefix: str = "t") -> str:
        return f"{prefix}-{test}-{uuid.uuid4().hex[:10]}"

    return make


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    tests_dir = Path(__file__).resolve().parent
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if KAFKA_FIXTURES & fixtures:
            item.add_marker(pytest.mark.kafka)
        if "dev_broker" in fixtures:
            item.add_marker(pytest.mark.dev_broker)
        path = Path(str(item.path)).resolve()
        if path.is_relative_to(tests_dir) and runs_on_apache_kafka(path.relative_to(tests_dir)):
            item.add_marker(pytest.mark.apache_ci)
