"""The main-text extractor's passes (trawl.content.article) on small pages written to show
each rule: the container, the main-content pass, the block filter, and Markdown."""

from __future__ import annotations

from trawl.content.article import (
    MAX_MARKUP,
    MIN_CONTAINER_CHARS,
    article_blocks,
    parse,
    to_markdown,
    to_text,
)

STORY = (
    "The harbour wall will be rebuilt in spring, the council said on Tuesday, after two "
    "winter storms washed away a long stretch of the outer pier and left the rubble exposed."
)
SECOND = (
    "Engineers found that the stone facing had been pulled away by the sea in several "
    "places, and the repairs will use granite recovered from the seabed where they can."
)
NAVIGATION = '<nav><ul><li><a href="/">Home</a></li><li><a href="/news">News</a></li></ul></nav>'


def page(body: str, head: str = "<title>T</title>") -> str:
    return f"<!doctype html><html><head>{head}</head><body>{body}</body></html>"


def text_of(body: str) -> str:
    return to_text(article_blocks(parse(page(body))))


def test_the_most_specific_container_wins_over_a_larger_page() -> None:
    sidebar = "<aside><p>" + "Sidebar words that are not the story at all. " * 10 + "</p></aside>"
    body = (
        f"{NAVIGATION}<div class='layout'><div itemprop='articleBody'><p>{STORY}</p>"
        f"<p>{SECOND}</p></div><div class='promo'><p>{'Subscribe to our weekly letter now. ' * 12}"
        f"</p></div>{sidebar}</div>"
    )
    assert text_of(body).splitlines() == [STORY, SECOND]


def test_a_teaser_card_is_too_small_to_be_the_container() -> None:
    teaser = "<article><p>A short teaser of another story.</p></article>"
    story = f"<article><p>{STORY}</p><p>{SECOND}</p></article>"
    assert len("A short teaser of another story.") < MIN_CONTAINER_CHARS
    assert text_of(teaser + story).splitlines() == [STORY, SECOND]


def test_a_story_cut_by_advertisements_is_taken_whole_in_order() -> None:
    advert = "<div class='ad'><p>Spring sale now on at Harlow's, up to half price.</p></div>"
    third = "The work is due to finish before the summer season brings visitors back. " * 3
    body = (
        f"<div class='article-body'><p>{STORY}</p><p>{SECOND}</p></div>{advert}"
        f"<div class='article-body'><p>{third.strip()}</p></div>"
    )
    lines = text_of(body).splitlines()
    assert lines == [STORY, SECOND, third.strip()]


def test_link_blocks_and_the_lead_in_are_dropped_the_headline_kept() -> None:
    share = "<p><a href='#fb'>Share on Facebook</a> <a href='#x'>Share on X</a></p>"
    related = (
        "<h4>Related</h4><ul><li><a href='/a'>Ferry timetable extended to March</a></li>"
        "<li><a href='/b'>Lifeboat crew called out twice in one night</a></li></ul>"
    )
    body = (
        f"<article><p>Home / News</p><p>By <a href='/authors/em'>Ellen Marsh</a> · 14 "
        f"February</p>{share}<h1>Harbour wall to be rebuilt</h1><p>{STORY}</p><p>{SECOND}</p>"
        f"{related}</article>"
    )
    assert text_of(body).splitlines() == [
        "Harbour wall to be rebuilt", STORY, SECOND, "Related",
    ]  # fmt: skip


def test_a_bullet_list_inside_the_story_is_kept() -> None:
    items = ["Phase one: the damaged stretch, April to September.", "Phase two: a toe wall."]
    listed = "".join(f"<li>{item}</li>" for item in items)
    body = f"{NAVIGATION}<article><p>{STORY}</p><ul>{listed}</ul><p>{SECOND}</p></article>"
    assert text_of(body).splitlines() == [STORY, *items, SECOND]


def test_a_listing_keeps_its_linked_headlines() -> None:
    teasers = "".join(
        f"<li><h2><a href='/s/{n}'>Headline number {n} of the day</a></h2><p>{STORY}</p></li>"
        for n in range(3)
    )
    lines = text_of(f"{NAVIGATION}<main><ul class='teasers'>{teasers}</ul></main>").splitlines()
    assert lines == [line for n in range(3) for line in (f"Headline number {n} of the day", STORY)]


def test_a_page_of_links_only_keeps_them() -> None:
    links = "".join(f"<p><a href='/p/{n}'>Page {n} of the archive</a></p>" for n in range(5))
    assert text_of(links).splitlines() == [f"Page {n} of the archive" for n in range(5)]


def test_a_cookie_banner_is_dropped_from_a_page_without_a_container() -> None:
    banner = (
        "<div id='cmp' class='cmp-banner'><p>We use cookies and similar technologies to "
        "personalise content, show adverts and analyse the use of our website; you can "
        "change your choice at any time in the privacy settings.</p></div>"
    )
    assert text_of(f"{banner}<div><p>{STORY}</p><p>{SECOND}</p></div>").splitlines() == [
        STORY, SECOND,
    ]  # fmt: skip


def test_a_wrapper_holding_only_navigation_gives_way_to_the_whole_page() -> None:
    menu = "".join(f"<li><a href='/m/{n}'>Menu entry {n}</a></li>" for n in range(40))
    body = (
        f"<div class='page-content nav-content'><nav><ul>{menu}</ul></nav></div>"
        f"<div class='story'><p>{STORY}</p><p>{SECOND}</p></div>"
    )
    assert text_of(body).splitlines() == [STORY, SECOND]


def test_markdown_has_headings_lists_code_tables_and_absolute_links() -> None:
    body = (
        f"<article><h1>Retention</h1><p>{STORY} See <a href='/docs/keep?a=1&amp;b=2'>the "
        f"options</a>.</p><h2>Setting it</h2><ul><li>First</li><li>Second</li></ul>"
        "<pre>$ ledger set --keep 90d\n$ ledger show</pre>"
        "<table><tr><th>Action</th><th>Effect</th></tr><tr><td>delete</td><td>gone</td></tr>"
        f"</table><p>{SECOND}</p></article>"
    )
    blocks = article_blocks(parse(page(body)))
    markdown = to_markdown(blocks, "https://docs.example/guide/")
    assert markdown.split("\n\n") == [
        "# Retention",
        f"{STORY} See [the options](https://docs.example/docs/keep?a=1&b=2).",
        "## Setting it",
        "- First\n- Second",
        "```\n$ ledger set --keep 90d\n$ ledger show\n```",
        "| Action | Effect |\n|---|---|\n| delete | gone |",
        SECOND,
    ]
    assert to_text(blocks).splitlines()[1] == f"{STORY} See the options."


def test_a_page_without_a_body_or_text_has_no_blocks() -> None:
    assert article_blocks(parse("")) == []
    assert article_blocks(parse("<html><head><title>x</title></head></html>")) == []
    assert article_blocks(parse("\ud800<p>lone surrogate</p>")) != []


def test_only_the_first_part_of_a_huge_page_is_read() -> None:
    filler = "<!--" + "x" * MAX_MARKUP + "-->"
    body = f"<div><p>{STORY}</p><p>{SECOND}</p>{filler}<p>After the cap.</p></div>"
    assert text_of(body.replace(filler, "")).splitlines() == [STORY, SECOND, "After the cap."]
    assert text_of(body).splitlines() == [STORY, SECOND]
