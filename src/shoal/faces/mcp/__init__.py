"""The MCP face: the fleet served to LLM agents over the Model Context Protocol.

* ``server`` -- builds and serves the server (stdio or streamable HTTP).
* ``sessions`` -- the desk: one fleet behind every session, and each session's agent and
  leases, so a tool call needs no token.
* ``tooling`` -- how a tool is declared, run off the event loop and its errors reported.
* ``agent_tools`` and ``fleet_tools`` -- the tools (and resources) themselves.
* ``models`` (the result schemas), ``errors`` (refusals as MCP errors), ``summary`` (the
  fleet in a few lines for an agent).

The modules import the MCP SDK, an optional dependency (``shoal[mcp]``): the CLI imports
this package only when ``shoal mcp`` serves. It never imports the CLI.
"""
