"""Installs the servers of the local provider into the cache, once.

- Kafka: the broker's jars, resolved from Maven Central with Maven (a small pom
  and ``dependency:copy-dependencies``);
- Toxiproxy: the real Go server, ``go install``-ed into the cache;
- PostgreSQL: Debian's server package (``apt-get`` when running as root).

Each ``ensure_*`` function returns what it installed and is cheap when the
cache is already warm. Overrides for air-gapped machines:
``STREAMCERT_KAFKA_LIB`` (a folder of broker jars), ``STREAMCERT_TOXIPROXY_BIN``,
``STREAMCERT_PG_BIN`` (a folder with ``postgres`` and ``initdb``), ``STREAMCERT_MAVEN_REPO``
(a mirror of Maven Central).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from streamcert.harness.stack.cache import cache_dir, cache_lock
from streamcert.harness.errors import ConfigurationError, PrerequisiteMissing, StartupFailed
from streamcert.harness.stack.process import run_logged
from streamcert.harness.stack.settings import executable, folder_with

__all__ = [
    "KAFKA_VERSION",
    "TOXIPROXY_VERSION",
    "MIN_JAVA",
    "JavaInfo",
    "find_java",
    "kafka_lib_dir",
    "ensure_kafka",
    "find_go",
    "toxiproxy_binary",
    "ensure_toxiproxy",
    "postgres_bin_dir",
    "ensure_postgres",
    "render_kafka_pom",
    "SPARK_KAFKA_JARS",
    "ensure_spark_kafka",
    "ensure_jars",
    "apt_install",
]

KAFKA_VERSION = "4.3.1"
TOXIPROXY_VERSION = "v2.12.0"
MIN_JAVA = 17
_LOG4J_VERSION = "2.24.3"
_SLF4J_VERSION = "2.0.17"
_COMPLETE = ".complete"


@dataclass(frozen=True)
class JavaInfo:
    path: str
    major: int
    version_line: str


def find_java() -> JavaInfo:
    """Locate ``java`` (``JAVA_HOME`` first) and check it is version 17 or newer."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and not (Path(java_home) / "bin" / "java").is_file():
        on_path = shutil.which("java")
        raise PrerequisiteMissing(
            f"JAVA_HOME={java_home} has no bin/java" + (" (it does not exist)" if not Path(java_home).exists()
                                                        else "") + "; streamcert uses JAVA_HOME's Java when it is set.",
            hint=f"Point JAVA_HOME at a JDK or JRE {MIN_JAVA}+ (the folder that holds bin/java)"
                 + (f", or unset it to use {on_path} from PATH." if on_path else "."),
        )
    candidate = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if not candidate or not Path(candidate).exists():
        raise PrerequisiteMissing(
            "Java was not found (no JAVA_HOME/bin/java and no `java` on PATH); "
            "Kafka and Spark both need a Java runtime.",
            hint=f"Install OpenJDK {MIN_JAVA} or newer (Debian: `apt-get install openjdk-17-jre-headless`) "
            "or set JAVA_HOME.",
        )
    try:
        out = subprocess.run([candidate, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PrerequisiteMissing(f"`{candidate} -version` failed: {exc}.",
                                  hint="Check the Java installation or point JAVA_HOME at a working JDK.") from None
    text = (out.stderr or out.stdout).strip()
    major = parse_java_major(text)
    if major is None or major < MIN_JAVA:
        raise PrerequisiteMissing(
            f"Java {MIN_JAVA}+ is required; `{candidate} -version` said: {text.splitlines()[0] if text else '?'}.",
            hint=f"Install OpenJDK {MIN_JAVA} or newer and set JAVA_HOME to it.",
        )
    return JavaInfo(candidate, major, text.splitlines()[0])


def parse_java_major(version_output: str) -> int | None:
    """Major version from ``java -version`` output ('1.8.0_392' -> 8, '17.0.15' -> 17)."""
    match = re.search(r'version "([0-9]+)(?:\.([0-9]+))?', version_output)
    if not match:
        return None
    major = int(match.group(1))
    if major == 1 and match.group(2):
        major = int(match.group(2))
    return major


# --- Kafka -----------------------------------------------------------------

def render_kafka_pom(version: str = KAFKA_VERSION) -> str:
    """A pom whose runtime dependencies are exactly what a KRaft broker needs."""
    deps = [
        ("org.apache.kafka", "kafka_2.13", version),
        # Kafka 4 logs through SLF4J 2 to Log4j 2; the broker pom leaves the binding to us.
        ("org.slf4j", "slf4j-api", _SLF4J_VERSION),
        ("org.apache.logging.log4j", "log4j-slf4j2-impl", _LOG4J_VERSION),
        ("org.apache.logging.log4j", "log4j-core", _LOG4J_VERSION),
    ]
    return _render_pom("kafka-broker-runtime", version, deps)


def _render_pom(artifact: str, version: str, deps: list[tuple[str, str, str]], transitive: bool = True) -> str:
    # A wildcard exclusion keeps Maven from even reading the dependencies' own dependency lists.
    exclude = "" if transitive else \
        "<exclusions><exclusion><groupId>*</groupId><artifactId>*</artifactId></exclusion></exclusions>"
    body = "\n".join(
        f"    <dependency><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version>{exclude}"
        "</dependency>"
        for g, a, v in deps
    )
    return f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>io.streamcert</groupId>
  <artifactId>{artifact}</artifactId>
  <version>{version}</version>
  <packaging>pom</packaging>
  <dependencies>
{body}
  </dependencies>
</project>
"""


def kafka_lib_dir(version: str = KAFKA_VERSION) -> Path:
    """Where the broker jars for ``version`` live (may not exist yet)."""
    override = os.environ.get("STREAMCERT_KAFKA_LIB")
    if override:
        return folder_with("STREAMCERT_KAFKA_LIB", Path(override).expanduser(), ("kafka_2.13-*.jar",),
                           "a folder of Kafka broker jars (Kafka's libs/)")
    return cache_dir() / "kafka" / version / "lib"


def ensure_kafka(version: str = KAFKA_VERSION) -> Path:
    """Resolve the Kafka broker's jars into the cache once; return the folder of jars."""
    lib = kafka_lib_dir(version)
    if os.environ.get("STREAMCERT_KAFKA_LIB"):
        return lib
    if (lib / _COMPLETE).exists():
        return lib
    mvn = shutil.which("mvn")
    if not mvn:
        raise PrerequisiteMissing(
            f"Maven (`mvn`) is needed once to fetch Apache Kafka {version} from Maven Central, and it is not on PATH.",
            hint="Install Maven (Debian: `apt-get install maven`), or use `--provider testcontainers` with Docker, "
            "or `--provider external` with your own broker.",
        )
    with cache_lock(f"kafka-{version}"):
        if (lib / _COMPLETE).exists():
            return lib
        root = lib.parent
        root.mkdir(parents=True, exist_ok=True)
        (root / "pom.xml").write_text(render_kafka_pom(version))
        if lib.exists():
            shutil.rmtree(lib)
        code, output = run_logged(
            [mvn, "-B", "-q", *_maven_settings_args(root), "-f", str(root / "pom.xml"),
             "dependency:copy-dependencies", f"-DoutputDirectory={lib}", "-DincludeScope=runtime"],
            description=f"Resolving Apache Kafka {version} jars from Maven Central (first run only)",
            timeout=900,
        )
        if code != 0:
            raise PrerequisiteMissing(
                f"Maven could not resolve org.apache.kafka:kafka_2.13:{version} (exit code {code}).",
                hint="Check that Maven Central is reachable (proxy settings in ~/.m2/settings.xml; "
                "STREAMCERT_MAVEN_REPO names a mirror), or set STREAMCERT_KAFKA_LIB to a folder of broker jars.",
                details=output,
            )
        (lib / _COMPLETE).write_text(version)
    return lib


#: Spark's built-in Kafka connector, the baseline of the source benchmark. No 4.3.0 release of it is on
#: Maven Central, and only 4.0.0 of its token provider resolves there: the 4.2.0 connector with the 4.0.0
#: token provider loads into pyspark 4.3 and reads plain-text brokers (measured, not an official pairing).
SPARK_KAFKA_JARS = (
    ("org.apache.spark", "spark-sql-kafka-0-10_2.13", "4.2.0"),
    ("org.apache.spark", "spark-token-provider-kafka-0-10_2.13", "4.0.0"),
    ("org.apache.kafka", "kafka-clients", "3.9.2"),
    ("org.apache.commons", "commons-pool2", "2.13.1"),
)


def ensure_spark_kafka() -> list[Path]:
    """Resolve Spark's built-in Kafka connector jars (for ``spark.jars``) into the cache once; return them."""
    return ensure_jars([":".join(coordinates) for coordinates in SPARK_KAFKA_JARS])


def ensure_jars(coordinates: Sequence[str]) -> list[Path]:
    """Resolve Maven ``group:artifact:version`` coordinates, each alone (not its dependencies: pyspark ships
    most of what connectors need, and a connector's declaration lists the rest), into the cache once; return the
    jars for ``spark.jars``. This is how a connector declaration's ``spark_packages`` reach its query."""
    parsed = [_coordinates(text) for text in coordinates]
    if not parsed:
        return []
    digest = hashlib.sha256("\n".join(sorted(":".join(c) for c in parsed)).encode()).hexdigest()[:16]
    lib = cache_dir() / "jars" / digest / "lib"
    if not (lib / _COMPLETE).exists():
        mvn = shutil.which("mvn")
        if not mvn:
            raise PrerequisiteMissing(f"Maven (`mvn`) is needed once to fetch {', '.join(coordinates)}, and it is "
                                      "not on PATH.", hint="Install Maven (Debian: `apt-get install maven`).")
        with cache_lock(f"jars-{digest}"):
            if not (lib / _COMPLETE).exists():
                _resolve_jars(mvn, parsed, lib)
    return sorted(lib.glob("*.jar"))


def _coordinates(text: str) -> tuple[str, str, str]:
    parts = text.strip().split(":")
    if len(parts) != 3 or not all(re.fullmatch(r"[A-Za-z0-9_.\-]+", part) for part in parts):
        raise ConfigurationError(f"{text!r} is not a Maven coordinate.",
                                 hint="Write group:artifact:version, e.g. org.apache.spark:spark-sql-kafka-0-10_2.13:"
                                 "4.2.0.")
    return parts[0], parts[1], parts[2]


def _resolve_jars(mvn: str, coordinates: list[tuple[str, str, str]], lib: Path) -> None:
    root = lib.parent
    root.mkdir(parents=True, exist_ok=True)
    (root / "pom.xml").write_text(_render_pom("streamcert-connector-jars", "1", coordinates, transitive=False))
    if lib.exists():
        shutil.rmtree(lib)
    code, output = run_logged(
        [mvn, "-B", "-q", *_maven_settings_args(root), "-f", str(root / "pom.xml"), "dependency:copy-dependencies",
         f"-DoutputDirectory={lib}"],
        description=f"Resolving {len(coordinates)} jar(s) from Maven Central (first run only)", timeout=900)
    if code != 0:
        names = ", ".join(":".join(c) for c in coordinates)
        raise PrerequisiteMissing(f"Maven could not resolve {names} (exit code {code}).",
                                  hint="Check the coordinates and that Maven Central is reachable "
                                  "(STREAMCERT_MAVEN_REPO names a mirror).", details=output)
    (lib / _COMPLETE).write_text("ok")


def _maven_settings_args(workdir: Path) -> list[str]:
    """Maven keeps its downloads in streamcert's cache; ``STREAMCERT_MAVEN_REPO`` names a mirror of Central."""
    args = [f"-Dmaven.repo.local={cache_dir() / 'm2'}"]
    mirror = os.environ.get("STREAMCERT_MAVEN_REPO")
    if mirror:
        settings = workdir / "settings.xml"
        settings.write_text(
            "<settings><mirrors><mirror><id>streamcert-mirror</id><mirrorOf>*</mirrorOf>"
            f"<url>{mirror}</url></mirror></mirrors></settings>\n")
        args += ["-s", str(settings)]
    return args


# --- Toxiproxy ---------------------------------------------------------------

def toxiproxy_binary(version: str = TOXIPROXY_VERSION) -> Path:
    """Path of the Toxiproxy server binary for ``version`` (may not exist yet)."""
    override = os.environ.get("STREAMCERT_TOXIPROXY_BIN")
    if override:
        path = Path(override).expanduser()
        executable("STREAMCERT_TOXIPROXY_BIN", path, "a toxiproxy-server binary", ("-version",), expect="toxiproxy")
        return path
    return cache_dir() / "toxiproxy" / version / "server"


#: Where Go's official tarball installs, often not on a non-login shell's PATH.
GO_FALLBACKS: tuple[str, ...] = ("/usr/local/go/bin/go",)


def find_go() -> str | None:
    """The ``go`` command, from PATH or the usual install location; None when absent."""
    return shutil.which("go") or next((path for path in GO_FALLBACKS if Path(path).exists()), None)


def ensure_toxiproxy(version: str = TOXIPROXY_VERSION) -> Path:
    """Build the real Toxiproxy server with ``go install`` into the cache once; return the binary."""
    binary = toxiproxy_binary(version)
    if binary.exists():
        return binary
    go = find_go()
    if not go:
        raise PrerequisiteMissing(
            f"Go is needed once to build Toxiproxy {version}, and `go` is not on PATH.",
            hint="Install Go 1.22+ (https://go.dev/dl or Debian's golang package), or set "
            "STREAMCERT_TOXIPROXY_BIN to a toxiproxy-server binary, or use `--provider testcontainers`.",
        )
    with cache_lock(f"toxiproxy-{version}"):
        if binary.exists():
            return binary
        gobin = binary.parent
        gobin.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, GOBIN=str(gobin))
        env.setdefault("GOPATH", str(cache_dir() / "go"))
        env.setdefault("GOFLAGS", "-modcacherw")
        code, output = run_logged(
            [go, "install", f"github.com/Shopify/toxiproxy/v2/cmd/server@{version}"],
            description=f"Building Toxiproxy {version} with go install (first run only)",
            timeout=900, env=env,
        )
        if code != 0 or not binary.exists():
            raise PrerequisiteMissing(
                f"`go install github.com/Shopify/toxiproxy/v2/cmd/server@{version}` failed (exit code {code}).",
                hint="Check that the Go module proxy is reachable (GOPROXY), or set STREAMCERT_TOXIPROXY_BIN.",
                details=output,
            )
    return binary


# --- PostgreSQL --------------------------------------------------------------

def postgres_bin_dir() -> Path | None:
    """The newest folder holding PostgreSQL's ``postgres`` and ``initdb``, or None."""
    override = os.environ.get("STREAMCERT_PG_BIN")
    if override:
        folder = folder_with("STREAMCERT_PG_BIN", Path(override).expanduser(), ("postgres", "initdb"),
                             "the bin folder of a PostgreSQL server installation (with postgres and initdb)")
        executable("STREAMCERT_PG_BIN", folder / "postgres", "PostgreSQL's server", ("--version",),
                   expect="PostgreSQL")
        return folder
    candidates = []
    for folder in Path("/usr/lib/postgresql").glob("*/bin"):
        if (folder / "postgres").exists() and (folder / "initdb").exists():
            try:
                candidates.append((int(folder.parent.name), folder))
            except ValueError:
                continue
    if candidates:
        return max(candidates)[1]
    initdb = shutil.which("initdb")
    if initdb and shutil.which("postgres"):
        return Path(initdb).resolve().parent
    return None


def ensure_postgres() -> Path:
    """Find PostgreSQL's server binaries, installing Debian's package when missing and root."""
    found = postgres_bin_dir()
    if found is not None and (found / "postgres").exists():
        return found
    apt = shutil.which("apt-get")
    if os.geteuid() != 0 or not apt:
        raise PrerequisiteMissing(
            "The PostgreSQL server (postgres, initdb) is not installed, and streamcert can only install it "
            "itself when running as root on Debian/Ubuntu.",
            hint="Install it (`sudo apt-get install postgresql`), or set STREAMCERT_PG_BIN, "
            "or use `--provider testcontainers` with Docker.",
        )
    with cache_lock("postgres-apt"):
        found = postgres_bin_dir()
        if found is not None:
            return found
        apt_install("postgresql", "PostgreSQL", "Install the postgresql package by hand, or set STREAMCERT_PG_BIN.")
        _stop_distribution_cluster()
    found = postgres_bin_dir()
    if found is None:
        raise StartupFailed("apt-get installed postgresql but no server binaries were found under /usr/lib/postgresql.",
                            hint="Set STREAMCERT_PG_BIN to the folder with `postgres` and `initdb`.")
    return found


def apt_install(package: str, what: str, hint: str) -> None:
    """``apt-get update`` and ``apt-get install package`` (root on Debian/Ubuntu; the caller checked), with
    progress lines; a PrerequisiteMissing with ``hint`` and apt's output when either fails."""
    apt = shutil.which("apt-get") or "apt-get"
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    install = [apt, "install", "-y", "-q", "--no-install-recommends", package]
    for argv, step in (([apt, "update", "-q"], "apt-get update"), (install, f"apt-get install {package}")):
        code, output = run_logged(argv, description=f"Installing {what}: {step}", timeout=900, env=env)
        if code != 0:
            raise PrerequisiteMissing(f"`{' '.join(argv)}` failed (exit code {code}).", hint=hint, details=output)


def _stop_distribution_cluster() -> None:
    # Debian's package may start a cluster on port 5432; streamcert runs its own private one.
    service = shutil.which("service")
    if service:
        subprocess.run([service, "postgresql", "stop"], capture_output=True, timeout=60)
