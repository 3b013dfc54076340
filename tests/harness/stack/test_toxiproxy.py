"""The Toxiproxy client of several servers in one process: toxiproxy-python reads the server's address from class
attributes at each call, so each use holds it for its whole ``with`` block."""

from __future__ import annotations

import threading
import time

from streamcert.harness.stack.toxiproxy import ToxiproxyApi


def test_two_threads_driving_two_servers_never_see_each_other_s_address():
    from toxiproxy.api import APIConsumer

    seen: list[tuple[int, int]] = []

    def use(api: ToxiproxyApi) -> None:
        for _ in range(20):
            with api.session():
                first = APIConsumer.port
                time.sleep(0.001)  # the other thread runs meanwhile, and must wait
                seen.append((first, APIConsumer.port))

    threads = [threading.Thread(target=use, args=(ToxiproxyApi("127.0.0.1", port),)) for port in (1001, 1002)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(seen) == 40 and all(before == after for before, after in seen)
    assert {before for before, _ in seen} == {1001, 1002}
