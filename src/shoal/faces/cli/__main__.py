"""``python -m shoal.faces.cli``: the ``shoal`` command where the script is not installed."""

from shoal.faces.cli.root import main

main()
