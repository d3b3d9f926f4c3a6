"""The rule ``--render auto`` follows, on the signals the parser reads beside the links."""

from __future__ import annotations

import pytest

from trawl.config import RenderConfig
from trawl.demo.spa import SHELL
from trawl.extract.parser import parse_html
from trawl.render.rule import MIN_TEXT, RenderPlan, script_built

ARTICLE = (
    "<html><body><article><h1>A title</h1><p>" + "words of an article " * 60 + "</p>"
    + "".join(f"<a href='/a/{n}'>{n}</a>" for n in range(12))
    + "</article><script>" + "var tracking = 1;" * 400 + "</script></body></html>"
).encode()  # fmt: skip


def built(html: bytes) -> bool:
    page = parse_html(html, script_signals=True)
    assert page.signals is not None
    return script_built(page.signals, len(page.links))


@pytest.mark.parametrize(
    ("html", "expected"),
    [
        pytest.param(SHELL, True, id="empty-root"),
        pytest.param(b'<div id="app"> <!-- filled by app.js --> </div><script>x()</script>',
                     True, id="empty-app-with-comment"),
        pytest.param(b"<app-root></app-root><script src=main.js></script>", True,
                     id="angular-root"),
        pytest.param(b"<p>Loading...</p><script src=/bundle.js></script>", True,
                     id="little-text"),
        pytest.param(b"<p>" + b"x " * 400 + b"</p><script>" + b"a;" * 5000 + b"</script>",
                     True, id="no-links-large-payload"),
        pytest.param(ARTICLE, False, id="article-with-analytics"),
        pytest.param(b"<p>Short page, no script.</p>", False, id="no-script"),
        pytest.param(b'<div id="root"><p>' + b"served text " * 50 + b"</p>"
                     + b'<a href="/x">x</a>' * 3 + b"</div><script src=a.js></script>",
                     False, id="root-rendered-on-the-server"),
    ],
)  # fmt: skip
def test_the_rule_renders_script_built_pages_only(html: bytes, expected: bool) -> None:
    assert built(html) is expected


def test_text_in_scripts_and_styles_is_not_visible_text() -> None:
    hidden = "<style>p{}</style><script>" + "'x'," * MIN_TEXT + "</script><template>"
    page = parse_html((hidden + "t" * 10 + "</template><p>seen</p>").encode(),
                      script_signals=True)  # fmt: skip
    assert page.signals is not None
    assert page.signals.text_chars == len("seen")
    assert page.signals.script_bytes == len("'x'," * MIN_TEXT)


def test_signals_are_read_only_when_asked_for() -> None:
    assert parse_html(SHELL).signals is None


def test_include_patterns_always_render_and_the_rest_follow_the_mode() -> None:
    plan = RenderPlan(RenderConfig(mode="never", include=(r"^https://app\.example\.com/",)))
    assert plan.mode_for("https://app.example.com/inbox") == "always"
    assert plan.mode_for("https://www.example.com/") == "never"
    assert RenderPlan(RenderConfig(mode="auto")).mode_for("https://a.test/") == "auto"
