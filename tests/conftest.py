import os

import pytest
from hypothesis import settings

# CI runs the property tests on a fixed seed so a submission's result does not depend on which random examples
# came up; locally (`make test` without CI set) every run explores new examples.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

from tests.harness import RunningProxy, Tansu, free_port, proxy_config, start_proxy


@pytest.fixture(params=["uvloop", "asyncio"])
def sidecar(request):
    """Tansu advertising the proxy's address, and the proxy in front of it (sidecar mode), on uvloop (what the
    proxy runs on in production) and on the standard asyncio loop (its fallback)."""
    proxy_port, broker_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    proxy = start_proxy(proxy_config(proxy_port, broker_port), loop_kind=request.param)
    yield Sidecar(proxy, broker)
    proxy.stop()
    broker.stop()


class Sidecar:
    def __init__(self, proxy: RunningProxy, broker: Tansu) -> None:
        self.proxy = proxy
        self.broker = broker

    @property
    def bootstrap(self) -> str:
        return self.proxy.bootstrap
