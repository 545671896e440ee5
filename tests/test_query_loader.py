"""Query strings loaded once per text (:class:`locky.http.media.QueryLoader`): lists, counts and
authorization checks asked with the same query again answer exactly as the first time,
refusals included, and one request's query never leaks into another's."""

from __future__ import annotations

import falcon.testing

from locky.http.media import QueryLoader
from locky.schemas import UserFilterSchema


def test_a_remembered_query_answers_as_the_first_time(locky_client, locky_admin):
    for email in ("ada@example.com", "bob@example.com", "carl@example.com"):
        locky_client.account(email)
    headers = locky_admin.headers

    def get(path: str, query: str):
        return locky_client.simulate_get(path, headers=headers, query_string=query)

    for _ in range(3):
        page = get("/v1/internal/users", "limit=2")
        assert page.status_code == 200 and len(page.json["users"]) == 2 and page.json["next_after_id"] is not None
        # The count loads the same text and drops limit and after_id from what it got:
        # the list's next load must still have them.
        count = get("/v1/internal/users/count", "limit=2")
        assert count.status_code == 200 and count.json == {"count": 4}
        refused = get("/v1/internal/users", "limit=0")
        assert refused.status_code == 400 and set(refused.json) == {"limit"}
        repeated = get("/v1/internal/users", "limit=2&limit=3")
        assert repeated.status_code == 400 and refused.json != repeated.json
        one = get("/v1/internal/users", "email=bob@example.com")
        assert [user["email"] for user in one.json["users"]] == ["bob@example.com"]


def test_it_keeps_a_bounded_number_of_short_texts():
    loader = QueryLoader(UserFilterSchema(), size=4, longest=20)

    def load(query: str) -> dict:
        return loader(falcon.Request(falcon.testing.create_environ(query_string=query)))

    first = load("limit=7")
    first["limit"] = 99  # the caller's copy
    assert load("limit=7") == {"limit": 7, "after_id": 0}
    for limit in range(1, 5):
        assert load(f"limit={limit}") == {"limit": limit, "after_id": 0}
    assert len(loader._loaded) <= 4
    long_text = "email=" + "x" * 30 + "@example.com"
    assert load(long_text)["email"] == "x" * 30 + "@example.com"
    assert long_text not in loader._loaded
