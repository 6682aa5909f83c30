"""The multihost tier's session fixture (hosts_harness.session_hosts)."""

import pytest
from hosts_harness import session_hosts


@pytest.fixture(scope="session")
def hosts(tmp_path_factory):
    yield from session_hosts(tmp_path_factory)
