"""The dashboard's pages and people's actions, through a real client against the app over
a real fleet (memory, SQLite and PostgreSQL where it is cheap).

What a person relies on: the lanes show every registered agent and what it holds, queues
and had stolen; untrusted task text is shown escaped everywhere; no page ever shows a lease
token; actions need an admin, a confirmation form and the session's CSRF token, change
nothing otherwise, and a refusal from the fleet is a readable page; a fleet with tokens asks
people to sign in; a big fleet still draws quickly.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from shoal import Fleet
from shoal.faces.web.guard import COOKIE
from shoal.faces.web.lanes import FULL_LANES, PER_LANE
from shoal.model import Agent, Lease
from tests.web.dash_support import BASE, client_for, clone_tasks, csrf_of, page

NASTY = "<script>alert('x')</script> & \"quotes\" <b>bold</b> {{ 7*7 }}"
PAGES = ("/", "/lanes", "/tasks", "/health", "/tasks?state=claimed", "/tasks?state=dead")


@pytest.fixture
def fleet(store_url: str) -> Fleet:
    with Fleet.open(store_url) as opened:
        yield opened


@pytest.fixture
def client(fleet: Fleet) -> TestClient:
    return client_for(fleet)


def held(fleet: Fleet, agent: str) -> Lease:
    claim = fleet.claim(agent)
    assert claim, claim
    return claim.leases[0]


def dead_task(fleet: Fleet, agent: str, title: str = "doomed") -> int:
    """A task that failed its one attempt."""
    task = fleet.post(title, max_attempts=1, priority=1)
    lease = held(fleet, agent)
    assert lease.task_id == task.id
    fleet.fail(lease, "boom <img src=x onerror=alert(1)>")
    assert fleet.get(task.id).state == "dead"
    return task.id


# ---------------------------------------------------------------- the fleet's lanes


def test_each_registered_agent_has_a_lane_with_its_held_queued_and_stolen_tasks(
    client: TestClient, fleet: Fleet
) -> None:
    fleet.register("ada", domains=["web"])
    fleet.register("bob")
    fleet.register("cy")
    first, second = fleet.post_many([{"title": "a1", "to": "ada"}, {"title": "a2", "to": "ada"}])
    pooled = fleet.post("in the pool", priority=9).id
    ada = held(fleet, "ada")  # takes a1 from its own queue's head
    assert ada.task_id == first
    fleet.post("pool first", priority=1)
    bob = held(fleet, "bob")  # the pool
    third = fleet.claim("cy")  # the pool's last task
    response = client.get("/")
    assert response.status_code == 200
    doc = page(response.text)
    lanes = {s.attrs["data-lane"]: s for s in doc.find_all("section", class_="lane")}
    assert {"pool", "ada", "bob", "cy"} <= set(lanes)
    assert doc.find(id="lanes").attrs["hx-trigger"].startswith("sse:fleet")
    assert lanes["ada"].find(data_task=str(ada.task_id), data_held=True)
    assert lanes["bob"].find(data_task=str(bob.task_id), data_held=True)
    # cy took whatever was left (the pool's last task): drawn in cy's lane, held.
    assert third.leases[0].task_id == pooled
    assert lanes["cy"].find(data_task=str(pooled), data_held=True)
    assert lanes["ada"].find(data_task=str(second)).attrs.get("data-held") is None
    assert not lanes["pool"].find_all(data_task=True)
    # The fragment the live stream reloads draws the same lanes.
    fragment = page(client.get("/lanes").text)
    assert {s.attrs["data-lane"] for s in fragment.find_all("section")} == set(lanes)


def test_a_stolen_task_is_drawn_in_the_thiefs_lane_and_marked(
    client: TestClient, fleet: Fleet
) -> None:
    fleet.register("ada")
    fleet.register("bob")
    ids = fleet.post_many([{"title": f"queued {i}", "to": "ada"} for i in range(4)])
    assert held(fleet, "ada").task_id == ids[0]  # at work: a victim thieves may rob
    before = page(client.get("/").text)
    lanes = {s.attrs["data-lane"]: s for s in before.find_all("section", class_="lane")}
    drawn = [t.attrs["data-task"] for t in lanes["ada"].find_all(data_task=True)]
    assert drawn == [str(i) for i in ids]  # the head (held), then its queue in claim order
    claim = fleet.claim("bob")  # the pool is empty: bob steals from ada's tail
    assert claim.sources == ("steal",), claim
    taken = claim.leases[0].task_id
    after = page(client.get("/lanes").text)
    lanes = {s.attrs["data-lane"]: s for s in after.find_all("section", class_="lane")}
    mark = lanes["bob"].find(data_task=str(taken))
    assert "data-stolen" in mark.attrs and "data-held" in mark.attrs
    assert not lanes["ada"].find_all(data_task=str(taken))


def test_a_long_queue_is_drawn_to_a_bound_and_says_how_many_more(
    client: TestClient, fleet: Fleet
) -> None:
    fleet.register("ada")
    fleet.post_many([{"title": f"t{i}", "to": "ada"} for i in range(PER_LANE + 7)])
    doc = page(client.get("/").text)
    lane = doc.find("section", data_lane="ada")
    assert len(lane.find_all(data_task=True)) == PER_LANE
    assert "and 7 more" in lane.text
    assert "tail" in lane.find("li", class_="end tail").text


def test_the_agent_filter_narrows_the_lanes(client: TestClient, fleet: Fleet) -> None:
    for name in ("web-1", "web-2", "db-1"):
        fleet.register(name)
    doc = page(client.get("/?agent=web").text)
    assert {s.attrs["data-lane"] for s in doc.find_all("section", class_="lane")} == {
        "pool",
        "web-1",
        "web-2",
    }
    assert doc.find(id="lanes").attrs["hx-get"] == "/lanes?agent=web"


# ---------------------------------------------------------------- untrusted text, secrets


def test_task_text_is_escaped_on_every_page(client: TestClient, fleet: Fleet) -> None:
    fleet.register("ada")
    dead = dead_task(fleet, "ada", NASTY)
    nasty = fleet.post(NASTY, body=NASTY, payload={"html": NASTY}, domain="web")
    fleet.post(NASTY, to="ada")
    for path in (*PAGES, f"/tasks/{nasty.id}", f"/tasks/{dead}", "/tasks?q=script"):
        html = client.get(path).text
        assert "<script>alert" not in html, path
        assert "<b>bold" not in html, path
        assert "<img src=x" not in html, path
        assert "onerror=alert(1)>" not in html, path
    detail = client.get(f"/tasks/{nasty.id}").text
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &#34;quotes&#34;" in detail
    assert "{{ 7*7 }}" in detail  # shown as written: task text is never a template
    listing = page(client.get("/tasks?q=script").text)
    assert NASTY in listing.find("tr", data_task=str(nasty.id)).text


def test_no_page_shows_a_lease_token(client: TestClient, fleet: Fleet) -> None:
    fleet.register("ada")
    fleet.register("bob")
    fleet.post("held one")
    fleet.post("held two", to="bob")
    leases = [held(fleet, "ada"), held(fleet, "bob")]
    paths = [*PAGES, *(f"/tasks/{lease.task_id}" for lease in leases)]
    paths += ["/?agent=ada", "/lanes?agent=bob", "/tasks?agent=ada"]
    for path in paths:
        html = client.get(path).text
        for lease in leases:
            assert lease.token not in html, (path, lease)
    detail = page(client.get(f"/tasks/{leases[0].task_id}").text)
    assert detail.find_all("dl")
    assert "ada" in detail.find("section", aria_labelledby="h-lease").text


def test_the_task_detail_has_its_fields_dependencies_and_every_event(
    client: TestClient, fleet: Fleet
) -> None:
    fleet.register("ada")
    first = fleet.post("first")
    second = fleet.post("second", after=[first.id])
    lease = held(fleet, "ada")
    fleet.fail(lease, "flaky network")
    response = client.get(f"/tasks/{second.id}")
    doc = page(response.text)
    assert doc.find("h1").text.startswith(f"Task #{second.id}")
    assert doc.find("a", href=f"/tasks/{first.id}")
    events = fleet.show(first.id).events
    detail = page(client.get(f"/tasks/{first.id}").text)
    rows = detail.find_all("tr", data_event=True)
    assert [r.attrs["data-event"] for r in rows] == [str(e.id) for e in events]
    assert {"posted", "claimed", "failed"} <= {e.kind for e in events}
    assert "flaky network" in detail.find("section", aria_labelledby="h-errors").text
    assert client.get("/tasks/999999").status_code == 404


def test_the_task_detail_says_who_posted_it_and_its_group(client: TestClient, fleet: Fleet) -> None:
    fleet.register("ada")
    theirs = fleet.post("from ada", posted_by="ada", group="deploys")
    fields = page(client.get(f"/tasks/{theirs.id}").text).find("dl", class_="fields")
    shown = {row.find("dt").text: row.find("dd") for row in fields.find_all("div")}
    assert shown["Posted by"].find("a", href="/agents/ada").text == "ada"
    assert shown["Group"].text == "deploys"
    mine = page(client.get(f"/tasks/{fleet.post('by hand').id}").text)
    assert "Group" not in mine.text and "a person or manager" in mine.text


def test_the_task_list_filters_searches_and_pages(client: TestClient, fleet: Fleet) -> None:
    fleet.register("ada")
    ids = fleet.post_many(
        [{"title": f"web {i}", "domain": "web", "priority": 2} for i in range(60)]
        + [{"title": "db thing", "domain": "db", "priority": 7}]
    )
    lease = held(fleet, "ada")  # the most urgent: a web task

    def rows(query: str) -> list[int]:
        doc = page(client.get(f"/tasks?{query}").text)
        return [int(r.attrs["data-task"]) for r in doc.find_all("tr", data_task=True)]

    assert rows("state=claimed") == [lease.task_id]
    assert rows("domain=db") == [ids[-1]]
    assert rows("priority=7") == [ids[-1]]
    assert rows("q=DB+THING") == [ids[-1]]
    first = rows("domain=web")
    assert len(first) == 50 and first == sorted(first, reverse=True)
    doc = page(client.get("/tasks?domain=web").text)
    older = doc.find("a", rel="next").attrs["href"]
    assert older == f"/tasks?domain=web&before={first[-1]}"
    second = rows(older.split("?", 1)[1])
    assert len(second) == 10 and set(first).isdisjoint(second)
    assert "at most 5000 tasks" in doc.find("p", class_="bound").text
    assert client.get("/tasks?state=nonsense").status_code == 400


# ---------------------------------------------------------------- actions


def test_retry_from_the_dead_letter_view_brings_a_task_back(
    client: TestClient, fleet: Fleet
) -> None:
    fleet.register("ada")
    dead = dead_task(fleet, "ada")
    health = client.get("/health")
    doc = page(health.text)
    row = doc.find("section", id="dead").find("tr", data_task=str(dead))
    form = row.find("form")
    assert form.attrs["action"] == f"/tasks/{dead}/retry" and form.attrs["method"] == "post"
    assert form.attrs["hx-confirm"]
    assert form.find("button", data_action="retry")
    fields = {i.attrs["name"]: i.attrs["value"] for i in form.find_all("input")}
    response = client.post(form.attrs["action"], data=fields)
    assert response.status_code == 303
    assert response.headers["location"] == "/health"
    assert fleet.get(dead).state == "pending"
    after = page(client.get("/health").text)
    assert not after.find("section", id="dead").find_all("tr", data_task=str(dead))


def test_an_action_without_the_csrf_token_is_refused_and_changes_nothing(
    client: TestClient, fleet: Fleet
) -> None:
    fleet.register("ada")
    dead = dead_task(fleet, "ada")
    for data in ({}, {"csrf": "0" * 64}, {"csrf": ""}):
        response = client.post(f"/tasks/{dead}/retry", data=data)
        assert response.status_code == 403, data
        assert "CSRF" in page(response.text).find("main").text
    assert fleet.get(dead).state == "dead"
    response = client.post("/agents/ada/pause", data={})
    assert response.status_code == 403
    assert not fleet.agent("ada").paused(fleet.clock.now())


def test_a_refusal_from_the_fleet_is_a_readable_page(client: TestClient, fleet: Fleet) -> None:
    task = fleet.post("only once")
    fleet.cancel(task.id)
    csrf = csrf_of(client.get("/health").text)
    response = client.post(f"/tasks/{task.id}/cancel", data={"csrf": csrf})
    assert response.status_code == 409
    assert response.headers["content-type"].startswith("text/html")
    message = page(response.text).find("p", class_="message")
    assert f"task {task.id} is already cancelled" in message.text
    assert "Traceback" not in response.text
    bad = client.post("/settings", data={"csrf": csrf, "name": "lease_ttl", "value": "soon"})
    assert bad.status_code == 400 and "lease_ttl" in page(bad.text).find("main").text
    unknown = client.post("/agents/nobody/pause", data={"csrf": csrf})
    assert unknown.status_code == 404


def test_release_cancel_pause_resume_and_settings_act_on_the_fleet(
    client: TestClient, fleet: Fleet
) -> None:
    fleet.register("ada")
    fleet.post("long job")
    lease = held(fleet, "ada")
    csrf = csrf_of(client.get("/health").text)
    detail = page(client.get(f"/tasks/{lease.task_id}").text)
    form = detail.find("button", data_action="release")
    assert form
    back = {"csrf": csrf, "back": f"/tasks/{lease.task_id}"}
    response = client.post(f"/tasks/{lease.task_id}/release", data=back)
    assert response.status_code == 303 and response.headers["location"] == back["back"]
    assert fleet.get(lease.task_id).state == "pending"
    assert client.post(f"/tasks/{lease.task_id}/release", data=back).status_code == 409
    assert client.post(f"/tasks/{lease.task_id}/cancel", data=back).status_code == 303
    assert fleet.get(lease.task_id).state == "cancelled"
    lane = page(client.get("/").text).find("section", data_lane="ada")
    assert lane.find("form", action="/agents/ada/pause").find("button", data_action="pause")
    assert client.post("/agents/ada/pause", data={"csrf": csrf}).status_code == 303
    assert fleet.agent("ada").paused(fleet.clock.now())
    fleet.post("while paused")
    assert fleet.claim("ada").reason == "paused"
    lane = page(client.get("/").text).find("section", data_lane="ada")
    assert lane.find("form", action="/agents/ada/resume").find("button", data_action="resume")
    assert client.post("/agents/ada/resume", data={"csrf": csrf}).status_code == 303
    assert fleet.agent("ada").paused_until is None
    assert fleet.claim("ada").tasks[0].title == "while paused"
    data = {"csrf": csrf, "name": "lease_ttl", "value": "90s"}
    assert client.post("/settings", data=data).status_code == 303
    assert fleet.settings().lease_ttl == 90
    assert client.post("/assess", data={"csrf": csrf}).status_code == 303
    assert fleet.status().assessment is not None
    health = page(client.get("/health").text)
    assert "Recommendation" in health.find("section", id="assessment").text
    assert len(health.find_all("svg", role="img")) == 4


def test_an_action_goes_back_only_to_a_page_of_this_site(client: TestClient, fleet: Fleet) -> None:
    task = fleet.post("x")
    csrf = csrf_of(client.get("/health").text)
    for back in ("https://evil.example/", "//evil.example/x", "javascript:alert(1)"):
        data = {"csrf": csrf, "back": back}
        response = client.post(f"/tasks/{task.id}/cancel", data=data)
        if response.status_code == 303:
            assert response.headers["location"].startswith("/")
            assert not response.headers["location"].startswith("//")
        fleet.retry(task.id)


# ---------------------------------------------------------------- signing in, roles


@pytest.fixture
def closed(fleet: Fleet) -> tuple[str, str]:
    """A fleet with tokens: (viewer secret, admin secret)."""
    _, viewer = fleet.create_token("viewer", name="watcher")
    _, admin = fleet.create_token("admin", name="boss")
    return viewer, admin


def sign_in(client: TestClient, token: str) -> TestClient:
    response = client.post("/login", data={"token": token, "next": "/health"})
    assert response.status_code == 303 and response.headers["location"] == "/health"
    cookie = response.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}=")
    lowered = cookie.lower()
    assert "httponly" in lowered and "samesite=strict" in lowered and "path=/" in lowered
    assert "secure" not in lowered  # plain http on loopback; https sets Secure
    assert client.cookies[COOKIE] == token  # the client keeps it, as a browser would
    return client


def test_pages_refuse_to_be_framed_by_another_site(client: TestClient) -> None:
    for path in ("/", "/tasks", "/health", "/login", "/tasks/12345"):
        headers = client.get(path).headers
        assert "frame-ancestors 'none'" in headers["content-security-policy"], path
        assert headers["x-frame-options"] == "DENY"


def test_a_fleet_with_tokens_sends_people_to_sign_in(fleet: Fleet, closed: tuple[str, str]) -> None:
    client = client_for(fleet)  # the owner's sign-in link opens a fleet with tokens no more
    assert COOKIE not in client.cookies
    for path in ("/", "/tasks?state=dead", "/health", "/lanes"):
        response = client.get(path)
        assert response.status_code == 303, path
        assert response.headers["location"].startswith("/login?next=%2F")
    reload = client.get("/lanes", headers={"HX-Request": "true", "HX-Current-URL": BASE + "/?a=b"})
    assert reload.status_code == 204  # htmx sends the whole page to sign in, not the region
    assert reload.headers["hx-redirect"] == "/login?next=%2F%3Fa%3Db"
    login = page(client.get("/login?next=/health").text)
    field = login.find("input", name="token")
    assert login.find("label", for_=str(field.attrs["id"])).text == "Access token"
    wrong = client.post("/login", data={"token": "shoal_wrong", "next": "/"})
    assert wrong.status_code == 401 and COOKIE not in wrong.headers.get("set-cookie", "")
    offsite = client.post("/login", data={"token": closed[0], "next": "//evil.example"})
    assert offsite.headers["location"] == "/"
    sign_in(client, closed[0])
    assert client.get("/health").status_code == 200
    out = client.post("/logout")
    assert out.status_code == 303 and f'{COOKIE}=""' in out.headers["set-cookie"]


def test_a_viewer_cannot_act_and_an_admin_can(
    fleet: Fleet, closed: tuple[str, str], store_url: str
) -> None:
    fleet.register("ada")
    dead = dead_task(fleet, "ada")
    viewer_token, admin_token = closed
    viewer = sign_in(client_for(fleet), viewer_token)
    html = viewer.get("/health").text
    assert 'data-action="retry"' not in html  # no buttons a viewer cannot use
    token = csrf_for(viewer)
    refused = viewer.post(f"/tasks/{dead}/retry", data={"csrf": token})
    assert refused.status_code == 403
    assert fleet.get(dead).state == "dead"
    admin = sign_in(client_for(fleet), admin_token)
    csrf = csrf_of(admin.get("/health").text)
    assert csrf != token  # a form token belongs to its session
    assert admin.post(f"/tasks/{dead}/retry", data={"csrf": token}).status_code == 403
    assert admin.post(f"/tasks/{dead}/retry", data={"csrf": csrf}).status_code == 303
    assert fleet.get(dead).state == "pending"
    bearer = client_for(fleet)
    headers = {"Authorization": f"Bearer {viewer_token}"}
    assert (
        bearer.post("/agents/ada/pause", data={"csrf": token}, headers=headers).status_code == 403
    )


def csrf_for(client: TestClient) -> str:
    """The CSRF token the server would give this session, read the way a page would carry
    it if the session could act: from the app's guard (a viewer's pages have no form)."""
    app = client.app
    guard = app.state.guard  # type: ignore[attr-defined]
    principal = guard.lookup(client.cookies[COOKIE])
    return str(guard.csrf_token(principal))


# ---------------------------------------------------------------- size


@pytest.mark.slow
def test_the_fleet_page_of_1000_agents_and_100k_tasks_draws_a_bounded_page(
    tmp_path: Path,
) -> None:
    path = tmp_path / "big.db"
    agents = [f"agent-{i:04d}" for i in range(1000)]
    with Fleet.open(f"sqlite://{path}") as fleet:
        fleet.configure(max_agents=2000)
        now = fleet.clock.now()
        with fleet._store.write() as tx:  # direct registration: 1000 register calls take 9 s
            for i, name in enumerate(agents):
                tx.save_agent(
                    Agent(
                        name,
                        domains=(f"d{i % 7}",),
                        idle_since=now,
                        last_seen=now,
                        registered_at=now,
                    )
                )
        template = fleet.post("template").id
    clone_tasks(str(path), template, 100_000 - 1, agents)
    with Fleet.open(f"sqlite://{path}") as fleet:
        for name in agents[::3]:
            fleet.claim(name)
        assert sum(fleet.status().counts.values()) == 100_000
        client = client_for(fleet)
        client.get("/")  # templates compiled, caches warm
        timings = []
        for _ in range(3):
            started = time.perf_counter()
            response = client.get("/")
            timings.append(time.perf_counter() - started)
        assert response.status_code == 200
        doc = page(response.text)
        lanes = doc.find_all("section", class_="lane")
        assert len(lanes) == 1001
        drawn = sum(len(lane.find_all("li", data_task=True)) for lane in lanes)
        print(
            f"\nfleet page, 1000 agents, 100k tasks: best {min(timings):.3f} s, "
            f"worst {max(timings):.3f} s, {len(response.content) / 1e6:.2f} MB, "
            f"{drawn} tasks drawn ({FULL_LANES} full lanes)"
        )
        # What keeps the page fast at any size is that it draws a bounded part of the fleet;
        # its time is measured by `make bench-web` (docs/web.md), not asserted here.
        assert drawn <= FULL_LANES * 25 + 1001 * 3
        assert len(response.content) < 3_000_000
        assert re.search(r"and \d+ more", response.text)
        started = time.perf_counter()
        assert client.get("/health").status_code == 200
        print(f"health page: {time.perf_counter() - started:.3f} s")


def test_signing_in_over_https_sets_a_secure_cookie(fleet: Fleet, closed: tuple[str, str]) -> None:
    client = TestClient(client_for(fleet).app, base_url="https://127.0.0.1", follow_redirects=False)
    response = client.post("/login", data={"token": closed[1], "next": "/"})
    assert response.status_code == 303
    assert "secure" in response.headers["set-cookie"].lower()


# ---------------------------------------------------------------- retry now and priority


def test_a_task_waiting_out_its_backoff_can_be_retried_now(
    client: TestClient, fleet: Fleet
) -> None:
    fleet.register("ada")
    task = fleet.post("flaky", retry_delay="1h")
    fleet.fail(held(fleet, "ada"), "try later")
    assert fleet.get(task.id).waiting(fleet.clock.now())
    form = page(client.get(f"/tasks/{task.id}").text).find("form", action=f"/tasks/{task.id}/retry")
    assert form.find("button", data_action="retry").text == "Retry now"
    fields = {i.attrs["name"]: i.attrs["value"] for i in form.find_all("input")}
    assert client.post(form.attrs["action"], data=fields).status_code == 303
    assert not fleet.get(task.id).waiting(fleet.clock.now())


def test_a_priority_changed_from_the_task_page_changes_the_claim_order(
    client: TestClient, fleet: Fleet
) -> None:
    first = fleet.post("first posted", priority=5)
    later = fleet.post("later, but urgent now", priority=5)
    detail = page(client.get(f"/tasks/{later.id}").text)
    form = detail.find("form", action=f"/tasks/{later.id}/priority")
    assert form.find("button", data_action="priority")
    csrf = csrf_of(client.get("/health").text)
    data = {"csrf": csrf, "priority": "critical", "back": f"/tasks/{later.id}"}
    assert client.post(f"/tasks/{later.id}/priority", data=data).status_code == 303
    assert fleet.get(later.id).priority == 1
    assert [t.id for t in fleet.ready()][:2] == [later.id, first.id]
    bad = client.post(f"/tasks/{later.id}/priority", data={**data, "priority": "soon"})
    assert bad.status_code == 400 and fleet.get(later.id).priority == 1
    assert client.post(f"/tasks/{first.id}/priority", data={"priority": "1"}).status_code == 403
    assert fleet.get(first.id).priority == 5


@pytest.mark.parametrize(
    "elsewhere",
    ["/\t/evil.example", "/\n/evil.example", "/\\evil.example", "//evil.example",
     "https://evil.example/", "/ /evil.example", "\t//evil.example"],
)  # fmt: skip
def test_signing_in_sends_people_only_to_a_path_of_this_site(
    fleet: Fleet, closed: tuple[str, str], elsewhere: str
) -> None:
    """A browser drops tabs and line breaks from an address and reads a backslash as a
    slash: ``/<TAB>/evil.example`` is ``//evil.example``, another site."""
    client = client_for(fleet, owner=False)
    form = page(client.get("/login", params={"next": elsewhere}).text)
    assert form.find("input", name="next").attrs["value"] == "/"
    assert "evil.example" not in client.get("/login", params={"next": elsewhere}).text
    signed = client.post("/login", data={"token": closed[1], "next": elsewhere})
    assert signed.status_code == 303 and signed.headers["location"] == "/"
    kept = client.post("/login", data={"token": closed[1], "next": "/tasks?state=dead"})
    assert kept.headers["location"] == "/tasks?state=dead"
