"""Real processes racing on a real store, killed with kill -9, restarted: every test here is
marked `slow` (see tests/conftest.py) and runs in `make test`, not `make test-fast`."""
