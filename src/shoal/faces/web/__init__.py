"""``shoal serve``: the fleet on the web -- a dashboard for people, a JSON API for agents
and scripts, Prometheus metrics for monitoring -- in one ASGI app over the same ``Fleet``
as every other face (needs ``pip install 'shoal[web]'``).

- ``app``: the app, its routes and how it is served;
- ``guard``: who is asking and may they (Host/Origin, tokens, CSRF, throttling);
- ``errors``: shoal's errors as HTTP answers;
- ``api``: ``/api/v1``, the Fleet's verbs as JSON, with an OpenAPI document;
- ``pages``, ``actions``, ``live``: the dashboard (with ``views``, ``lanes``, ``charts``,
  ``templates/`` and ``static/``) and its live stream of changes.
"""

from __future__ import annotations

from shoal.faces.web.app import create_app, serve

__all__ = ["create_app", "serve"]
