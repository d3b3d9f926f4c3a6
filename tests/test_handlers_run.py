"""Running a handler on a page: items from dicts, dataclasses and pydantic models, follows,
and one error line that fails the whole page."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from pydantic import BaseModel

from trawl.handlers.follow import Follow
from trawl.handlers.items import item_json
from trawl.handlers.page import Page
from trawl.handlers.run import HandlerResult, run_handler

PAGE = Page(url="http://shop.test/", body=b'<h1>Shop</h1><a href="/a">a</a><a href="b">b</a>')


@dataclass
class Price:
    amount: float
    currency: str = "GBP"


@dataclass
class Book:
    title: str
    tags: list[str] = field(default_factory=list)
    price: Price | None = None


class Review(BaseModel):
    stars: int
    text: str


class Shelf(BaseModel):
    name: str
    reviews: list[Review]


def test_items_are_compact_json_objects() -> None:
    assert item_json({"title": "Café", "n": 1, "ok": None}) == '{"title":"Café","n":1,"ok":null}'
    book = Book("One", ["a"], Price(9.5))
    assert json.loads(item_json(book)) == {
        "title": "One", "tags": ["a"], "price": {"amount": 9.5, "currency": "GBP"},
    }  # fmt: skip
    shelf = Shelf(name="s", reviews=[Review(stars=5, text="good")])
    assert item_json(shelf) == '{"name":"s","reviews":[{"stars":5,"text":"good"}]}'
    assert item_json({"in": Price(1.0), "model": Review(stars=1, text="x")}) == (
        '{"in":{"amount":1.0,"currency":"GBP"},"model":{"stars":1,"text":"x"}}'
    )


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("title", "an item must be a dict, a dataclass instance or a pydantic model, not str"),
        (["a"], "not list"),
        (Book, "not type"),
        ({1: "a"}, "an item's keys must be strings, not int"),
        ({"when": object()}, "an item value of type object is not JSON"),
    ],
)
def test_other_values_are_not_items(item: object, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        item_json(item)


def listing(page: Page) -> Iterator[object]:
    yield {"title": page.css("h1::text").get(), "url": page.url}
    yield from page.follow(page.css("a::attr(href)").getall(), label="book")
    yield Book("Two")
    yield Follow("http://shop.test/next", None, 2.0)
    yield Review(stars=4, text="fine")


def test_a_handler_s_yields_become_items_and_follows_in_order() -> None:
    result = run_handler(listing, PAGE)
    assert result == HandlerResult(
        items=[
            '{"title":"Shop","url":"http://shop.test/"}',
            '{"title":"Two","tags":[],"price":null}',
            '{"stars":4,"text":"fine"}',
        ],
        follows=[
            Follow("http://shop.test/a", "book"),
            Follow("http://shop.test/b", "book"),
            Follow("http://shop.test/next", None, 2.0),
        ],
        error=None,
    )


def test_a_handler_may_return_none_a_list_or_one_item() -> None:
    assert run_handler(lambda page: None, PAGE) == HandlerResult([], [], None)
    listed = run_handler(lambda page: [{"a": 1}, Follow("http://shop.test/x")], PAGE)
    assert listed == HandlerResult(['{"a":1}'], [Follow("http://shop.test/x")], None)
    assert run_handler(lambda page: {"a": 1}, PAGE).items == ['{"a":1}']
    assert run_handler(lambda page: Review(stars=1, text=""), PAGE).items == [
        '{"stars":1,"text":""}'
    ]
    assert run_handler(lambda page: Follow("http://shop.test/y"), PAGE).follows == [
        Follow("http://shop.test/y")
    ]


def test_an_unsupported_item_fails_the_page_with_one_line() -> None:
    def handler(page: Page) -> Iterator[object]:
        yield {"ok": 1}
        yield Follow("http://shop.test/z")
        yield 42

    result = run_handler(handler, PAGE)
    assert result == HandlerResult(
        [], [],
        "handler_failed: TypeError: an item must be a dict, a dataclass instance or a "
        "pydantic model, not int",
    )  # fmt: skip


def test_an_exception_mid_iteration_keeps_nothing_of_the_page() -> None:
    def handler(page: Page) -> Iterator[object]:
        yield {"first": 1}
        yield from page.follow("/a")
        raise ValueError("no price\nsecond line")

    assert run_handler(handler, PAGE) == HandlerResult(
        [], [], "handler_failed: ValueError: no price"
    )


def test_the_error_line_is_short_and_names_the_type() -> None:
    def long(page: Page) -> None:
        raise ValueError("x" * 500)

    def bare(page: Page) -> None:
        raise RuntimeError

    error = run_handler(long, PAGE).error
    assert error is not None
    assert error.startswith("handler_failed: ValueError: xxx")
    assert len(error) == 200
    assert run_handler(bare, PAGE).error == "handler_failed: RuntimeError"
    nan = run_handler(lambda page: {"x": float("nan")}, PAGE).error
    assert nan is not None
    assert nan.startswith("handler_failed: ValueError: Out of range float values")


def test_an_async_handler_is_refused() -> None:
    async def coroutine(page: Page) -> None:
        return None

    async def generator(page: Page) -> Iterator[object]:  # type: ignore[misc]
        yield {"a": 1}

    expected = "handler_failed: TypeError: a page handler must be a plain function or generator"
    assert (run_handler(coroutine, PAGE).error or "").startswith(expected)
    assert (run_handler(generator, PAGE).error or "").startswith(expected)
