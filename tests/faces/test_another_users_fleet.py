"""A fleet found in a folder another local user made private: someone else looking for a
fleet from that folder is refused with a message that says whose it is and what to do --
before, the search itself failed with an internal error (exit 70) -- and reads nothing.

The other user runs the system's Python on shoal's source: this machine's virtualenv
interpreter lives under a folder only its owner may enter, so it cannot be started as
another user. ``shoal status`` and ``shoal claim`` find their fleet by this search.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import pytest

import shoal
from shoal import Fleet
from tests.faces.cli_support import COMMAND, base_env
from tests.helpers import as_another_user

pytestmark = pytest.mark.slow

SYSTEM_PYTHON = Path("/usr/bin/python3")
SOURCE = Path(shoal.__file__).resolve().parents[1]
LOOK = """
import os, sys
sys.path.insert(0, sys.argv[1])
os.chdir(sys.argv[2])
from shoal.errors import StoreError
from shoal.stores import default_store_url
try:
    print("found", default_store_url())
except StoreError as exc:
    print(exc.message, exc.hint, sep="\\n", file=sys.stderr)
    sys.exit(2)
"""


def test_another_users_private_fleet_is_refused_by_name() -> None:
    if not SYSTEM_PYTHON.exists():
        pytest.skip("needs the system's python3 to play the other user")
    with tempfile.TemporaryDirectory(prefix="shoal-shared-") as shared:
        Path(shared).chmod(0o755)  # a folder both users can enter, as a shared checkout
        subprocess.run([*COMMAND, "init"], cwd=shared, env=base_env({}), check=True)
        with Fleet.open(f"sqlite:///{shared}/.shoal/fleet.db") as fleet:
            fleet.post("the owner's secret task")
        done = as_another_user(str(SYSTEM_PYTHON), "-c", LOOK, str(SOURCE), shared)
        assert done.returncode == 2, (done.stdout, done.stderr)
        assert "holds a fleet you may not read" in done.stderr, done.stderr
        assert "shoal serve" in done.stderr and "found" not in done.stdout
        with Fleet.open(f"sqlite:///{shared}/.shoal/fleet.db") as fleet:
            assert [t.title for t in fleet.tasks()] == ["the owner's secret task"]
