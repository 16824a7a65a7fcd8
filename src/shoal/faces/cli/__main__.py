"""``python -m shoal.faces.cli``: the ``shoal`` command where the script is not installed."""

from shoal.faces.cli import main

main()
