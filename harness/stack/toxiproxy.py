"""The real Toxiproxy server, and the links (proxies) every client byte passes through.

Driven with ``toxiproxy-python``. That client keeps the API address in class attributes, so
:meth:`ToxiproxyApi.session` re-points it for each use and holds a process-wide lock meanwhile: one process
(the jobs of ``certify --jobs``) can drive several servers, one call at a time.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from streamcert.harness.errors import ConfigurationError
from streamcert.harness.stack.install import TOXIPROXY_VERSION, ensure_toxiproxy
from streamcert.harness.stack.ports import LOOPBACK, ensure_port_free, free_port
from streamcert.harness.stack.process import ManagedProcess, ProcessBacked, token_env
from streamcert.harness.stack.readiness import toxiproxy_readiness

__all__ = ["TOXIC_TYPES", "Link", "LinkGroup", "ToxiproxyApi", "LocalToxiproxy"]

#: Held while a toxiproxy-python client is in use (its server address is a class attribute: one per process).
_CLIENT_LOCK = threading.RLock()

#: Toxic types of Toxiproxy 2.12 and the attributes each takes.
TOXIC_TYPES: dict[str, tuple[str, ...]] = {
    "latency": ("latency", "jitter"),
    "bandwidth": ("rate",),
    "slow_close": ("delay",),
    "timeout": ("timeout",),
    "reset_peer": ("timeout",),
    "slicer": ("average_size", "size_variation", "delay"),
    "limit_data": ("bytes",),
}


class ToxiproxyApi:
    """A Toxiproxy server's HTTP API at ``host:port`` (ours or someone else's)."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def version(self, timeout: float = 2.0) -> str:
        response = requests.get(f"{self.url}/version", timeout=timeout)
        response.raise_for_status()
        return response.text.strip()

    @contextlib.contextmanager
    def session(self) -> Iterator[Any]:
        """A ``toxiproxy.Toxiproxy`` client pointed at this server, for the ``with`` block only: toxiproxy-python
        keeps the server's address in class attributes, read at each call, so two stacks of one process (the jobs of
        ``certify --jobs``) take turns here, or one's calls would reach the other's server."""
        from toxiproxy import Toxiproxy
        from toxiproxy.api import APIConsumer

        with _CLIENT_LOCK:
            APIConsumer.host, APIConsumer.port = self.host, self.port
            yield Toxiproxy()

    def destroy(self, name: str) -> None:
        """Remove proxy ``name`` (nothing when there is none)."""
        with self.session() as client:
            proxy = client.get_proxy(name)
            if proxy is not None:
                proxy.destroy()

    def create_link(self, name: str, upstream: str, listen_port: int | None = None,
                    bind_host: str = LOOPBACK) -> "Link":
        """Create (or replace) proxy ``name`` forwarding to ``upstream``; clients reach it on loopback.

        ``bind_host`` is where Toxiproxy binds the proxy: loopback for a local
        server; all interfaces inside a container, whose port Docker publishes on loopback.
        """
        self.destroy(name)
        port = listen_port or free_port()
        if bind_host == LOOPBACK:
            ensure_port_free(port, f"Toxiproxy link {name!r}")
        with self.session() as client:
            client.create(upstream=upstream, name=name, listen=f"{bind_host}:{port}", enabled=True)
        return Link(self, name, LOOPBACK, port, upstream)


@dataclass
class Link:
    """One proxied connection path (e.g. clients → Kafka), where network faults are injected."""

    api: ToxiproxyApi
    name: str
    listen_host: str
    listen_port: int
    upstream: str

    @property
    def listen(self) -> str:
        return f"{self.listen_host}:{self.listen_port}"

    @contextlib.contextmanager
    def _proxy(self) -> Iterator[Any]:
        """This link's proxy, for the ``with`` block (see :meth:`ToxiproxyApi.session`)."""
        with self.api.session() as client:
            proxy = client.get_proxy(self.name)
            if proxy is None:
                raise ConfigurationError(f"Toxiproxy has no proxy named {self.name!r}.",
                                         hint="The Toxiproxy server was restarted or reset; restart the environment.")
            yield proxy

    def add_toxic(self, toxic_type: str, *, stream: str = "downstream", toxicity: float = 1.0,
                  name: str | None = None, **attributes: Any) -> str:
        """Add a toxic; return its name. Unknown types or attributes are refused before the API is called."""
        if toxic_type not in TOXIC_TYPES:
            raise ConfigurationError(f"Unknown toxic type {toxic_type!r}.",
                                     hint=f"Use one of: {', '.join(sorted(TOXIC_TYPES))}.")
        unknown = set(attributes) - set(TOXIC_TYPES[toxic_type])
        if unknown:
            raise ConfigurationError(
                f"Toxic {toxic_type!r} has no attribute(s) {', '.join(sorted(unknown))}.",
                hint=f"{toxic_type} takes: {', '.join(TOXIC_TYPES[toxic_type])}.")
        if stream not in ("upstream", "downstream"):
            raise ConfigurationError(f"Toxic stream must be 'upstream' or 'downstream', not {stream!r}.",
                                     hint="upstream = client to server, downstream = server to client.")
        toxic_name = name or f"{toxic_type}_{stream}"
        with self._proxy() as proxy:
            proxy.add_toxic(type=toxic_type, stream=stream, toxicity=toxicity, name=toxic_name, attributes=attributes)
        return toxic_name

    def remove_toxic(self, name: str) -> None:
        with self._proxy() as proxy:
            proxy.destroy_toxic(name)

    def toxics(self) -> dict[str, dict[str, Any]]:
        """Toxics now on this link, by name, as Toxiproxy reports them."""
        response = requests.get(f"{self.api.url}/proxies/{self.name}/toxics", timeout=5)
        response.raise_for_status()
        return {toxic["name"]: toxic for toxic in response.json()}

    def disable(self) -> None:
        """Take the link down: open connections drop, new ones are refused."""
        with self._proxy() as proxy:
            proxy.disable()

    def enable(self) -> None:
        with self._proxy() as proxy:
            proxy.enable()

    def clear(self) -> None:
        """Remove every toxic and bring the link up."""
        with self._proxy() as proxy:
            for name in list(proxy.toxics()):
                proxy.destroy_toxic(name)
            proxy.enable()


@dataclass
class LinkGroup:
    """Several links acting as one (a cluster's client links): every toxic, down and up applies to each."""

    links: list[Link]

    @property
    def name(self) -> str:
        return "+".join(link.name for link in self.links)

    @property
    def listen(self) -> str:
        """A bootstrap list: every link's address."""
        return ",".join(link.listen for link in self.links)

    @property
    def listen_host(self) -> str:
        return self.links[0].listen_host

    @property
    def listen_port(self) -> int:
        return self.links[0].listen_port

    @property
    def api(self) -> ToxiproxyApi:
        return self.links[0].api

    def add_toxic(self, toxic_type: str, *, stream: str = "downstream", toxicity: float = 1.0,
                  name: str | None = None, **attributes: Any) -> str:
        names = {link.add_toxic(toxic_type, stream=stream, toxicity=toxicity, name=name, **attributes)
                 for link in self.links}
        return names.pop()

    def remove_toxic(self, name: str) -> None:
        for link in self.links:
            link.remove_toxic(name)

    def toxics(self) -> dict[str, dict[str, Any]]:
        return self.links[0].toxics()

    def disable(self) -> None:
        for link in self.links:
            link.disable()

    def enable(self) -> None:
        for link in self.links:
            link.enable()

    def clear(self) -> None:
        for link in self.links:
            link.clear()


@dataclass
class LocalToxiproxy(ProcessBacked):
    """The Toxiproxy server as a child process on a free loopback port."""

    workdir: Path
    port: int = field(default_factory=free_port)
    version: str = TOXIPROXY_VERSION
    run_token: str = ""
    start_timeout: float = 20.0
    _process: ManagedProcess | None = field(default=None, init=False, repr=False)

    @property
    def api(self) -> ToxiproxyApi:
        return ToxiproxyApi(LOOPBACK, self.port)

    def start(self) -> None:
        if self._process is not None and self._process.is_running():
            return
        binary = ensure_toxiproxy(self.version)
        ensure_port_free(self.port, "Toxiproxy API")
        env = token_env(self.run_token)
        env.setdefault("LOG_LEVEL", "warn")
        self._process = ManagedProcess(
            "Toxiproxy", [str(binary), "-host", LOOPBACK, "-port", str(self.port)],
            self.workdir / "toxiproxy.log", env=env, stop_timeout=5,
        )
        self._process.start()
        self._process.wait_ready(toxiproxy_readiness(self.api, hint=f"Look at {self.workdir / 'toxiproxy.log'}."),
                                 self.start_timeout)
