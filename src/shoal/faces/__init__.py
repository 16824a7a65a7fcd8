"""The faces: how people and agents reach a fleet. Each face is a package and goes through
``Fleet`` only (never a store):

* ``cli`` -- the ``shoal`` command, one module per command group;
* ``mcp`` -- the MCP server for LLM agents (its SDK is optional: ``shoal[mcp]``).

What more than one face needs stays here, free of any face (an import-linter contract
checks it), so that a later face (a web one) can stand on it too:

* ``render`` -- the rich views and the words of a result (``ago``, a claim's text...);
* ``output`` -- the output shapes (JSON, plain lines, env) and text made safe to print;
* ``posting`` -- posting a task and saying where it went;
* ``importing`` -- reading beads, GitHub and JSON Lines exports into tasks.
"""
