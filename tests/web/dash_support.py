"""Helpers for the dashboard's tests: an app over a fleet, a client that acts as a person,
and a small HTML reader (the standard library's parser) to find elements by their
attributes, as the DOM contract names them."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser

from fastapi import FastAPI
from fastapi.testclient import TestClient

from shoal import Fleet
from shoal.faces.exposure import Exposure, allowed_hosts
from shoal.faces.web.app import create_app

HOST = "127.0.0.1"
BASE = f"http://{HOST}:8765"
#: The sign-in secret of the apps made here: the owner's proof on an open fleet.
OWNER = "the-owners-sign-in-secret-0123456789abcdef"
#: What the owner's CLI sends to an open fleet.
OWNER_HEADERS = {"Authorization": f"Bearer {OWNER}"}
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
        "track", "wbr"}  # fmt: skip


def exposure(port: int = 8765) -> Exposure:
    return Exposure(HOST, port, allowed=allowed_hosts(HOST, []))


def app_for(fleet: Fleet, port: int = 8765) -> FastAPI:
    return create_app(fleet, exposure(port), local_secret=OWNER)


def client_for(fleet: Fleet, *, owner: bool = True) -> TestClient:
    """A browser on the dashboard over ``fleet``: signed in with the owner's sign-in link
    (which sets the session cookie while the fleet is open), unless not ``owner``."""
    client = TestClient(app_for(fleet), base_url=BASE, follow_redirects=False)
    if owner:
        client.get("/login", params={"token": OWNER})
    return client


@dataclass
class Element:
    tag: str
    attrs: dict[str, str | None]
    children: list[Element] = field(default_factory=list)
    text_parts: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(self.text_parts) + "".join(c.text for c in self.children)

    def walk(self) -> Iterator[Element]:
        for child in self.children:
            yield child
            yield from child.walk()

    def find_all(self, tag: str | None = None, **attrs: str | bool) -> list[Element]:
        """Descendants with ``tag`` whose attributes match: a string compares the value,
        True asks only that the attribute is there (``data_task=True``)."""
        found = []
        for element in self.walk():
            if tag is not None and element.tag != tag:
                continue
            if all(_attr_matches(element, name, want) for name, want in attrs.items()):
                found.append(element)
        return found

    def find(self, tag: str | None = None, **attrs: str | bool) -> Element:
        found = self.find_all(tag, **attrs)
        assert found, f"no <{tag or '*'} {attrs}> in the page"
        return found[0]


def _attr_matches(element: Element, name: str, want: str | bool) -> bool:
    """``class_`` is ``class`` (each of its words must be there), ``data_task`` is
    ``data-task``."""
    key = name.rstrip("_").replace("_", "-")
    if key not in element.attrs:
        return False
    if want is True:
        return True
    value = element.attrs[key] or ""
    if key == "class":
        return set(str(want).split()) <= set(value.split())
    return value == want


class _Reader(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, dict(attrs))
        self.stack[-1].children.append(element)
        if tag not in VOID:
            self.stack.append(element)

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data: str) -> None:
        self.stack[-1].text_parts.append(data)


def page(html: str) -> Element:
    reader = _Reader()
    reader.feed(html)
    reader.close()
    return reader.root


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert found, "the page has no form with a CSRF token"
    return found.group(1)


def clone_tasks(path: str, template: int, count: int, agents: list[str]) -> None:
    """Add ``count`` copies of task ``template`` to the SQLite fleet at ``path`` in one
    statement, every other one queued for an agent of ``agents`` (the rest in the pool).

    For the size test only: posting 100k tasks through ``Fleet.post_many`` takes about
    20 s here, so the fleet is filled in SQL, each column copied from a task the Fleet
    posted (PRAGMA table_info: a new column is copied too), the store's triggers keeping
    the agents' queue counts. The fleet must be closed meanwhile."""
    conn = sqlite3.connect(path)
    try:
        columns = [row[1] for row in conn.execute("PRAGMA table_info(tasks)")]
        varied = {
            "id": None,
            "title": "'task ' || n",
            "priority": "1 + n % 9",
            "agent_id": "CASE WHEN n % 2 = 1 THEN json_extract(:agents, '$[' || "
            "(n % json_array_length(:agents)) || ']') END",
            "seq": "(SELECT max(seq) FROM tasks) + n",
        }
        names = [c for c in columns if varied.get(c, c) is not None]
        values = [varied.get(c) or c for c in names]
        conn.execute(
            f"WITH RECURSIVE series(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM series "
            f"WHERE n < :count) INSERT INTO tasks ({', '.join(names)}) "
            f"SELECT {', '.join(values)} FROM series, tasks WHERE tasks.id = :template",
            {"count": count, "template": template, "agents": json.dumps(agents)},
        )
        conn.execute("UPDATE counters SET value = (SELECT max(seq) FROM tasks) WHERE name = 'seq'")
        conn.commit()
    finally:
        conn.close()
