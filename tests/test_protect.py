"""Protected spans, pass-through of text already in Chinese, and the BOM, on real documents.

Rendering with the tiny random model (`tiny_bundle`), whose output is arbitrary text, shows
that what is protected never depended on the model copying it.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli import main
from producer import defaults
from producer.documents import ReadOptions, parse_text
from producer.protect import cjk_ratio, protected_spans
from producer.segment import split_sentences
from producer.stored_layout import dump_document, load_document
from tests.test_documents import read_whole

DATA = Path(__file__).parent / "data"


def spans_of(text: str, extra: tuple[str, ...] = ()) -> list[str]:
    return [text[start:end] for start, end in protected_spans(text, extra)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (  # URL with a query string and a fragment; the full stop after it is prose
            "Data at https://pulse.cio.gov/data/domains/https.csv?sort=desc&page=2#top.",
            ["https://pulse.cio.gov/data/domains/https.csv?sort=desc&page=2#top"],
        ),
        (
            "Mirror: www.gutenberg.org/ebooks/98?format=txt, or ftp://ftp.ibiblio.org/pub/.",
            ["www.gutenberg.org/ebooks/98?format=txt", "ftp://ftp.ibiblio.org/pub/"],
        ),
        (
            "Write to gbnewby@pglaf.org or mailto:help@gutenberg.org.",
            ["gbnewby@pglaf.org", "mailto:help@gutenberg.org"],
        ),
        (
            "Bare domains like pulse.cio.gov and rust-lang.org are kept; e.g. config.yaml is not.",
            ["pulse.cio.gov", "rust-lang.org"],
        ),
        (
            "Read {{ site.baseurl }}/notes, {% post_url 2016-07-21-launch %} and {# note #} now.",
            ["{{ site.baseurl }}", "{% post_url 2016-07-21-launch %}", "{# note #}"],
        ),
        ("Tom &amp; Jerry &#169; 2016 &#x2014; all", ["&amp;", "&#169;", "&#x2014;"]),
        ("Run `rg -i foo` or ``a `b` c`` first.", ["`rg -i foo`", "``a `b` c``"]),
        ("My friend 李明 lives in 北京 now.", ["李明", "北京"]),
    ],
)
def test_each_kind_of_protected_span(text, expected):
    assert spans_of(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Write to a@b@c.com today.", ["a@b@c.com"]),
        ("Write to @john@example.com today.", ["@john@example.com"]),
        ("Write to a@@b.com or a.b@c.d@e.example.org.", ["a@@b.com", "a.b@c.d@e.example.org"]),
        ("Ping a@b@c now.", []),  # no domain after its last @: not an address
        ("Ping a@b.com@c, b.com@c or a@b.com.org@c now.", []),  # nor a bare domain in one
        # a user b.com, a password, a host c: a user and password before an address are kept
        # as after a label (Email:a@b.com), and nothing is sent
        ("Ping b.com:x@c, b.com:8080@c, b.com:@c or b.com:x@c.org@d now.", []),
        ("Ping b.com:x@c.org or b.com:@c.org now.", ["b.com", "x@c.org", "b.com", "@c.org"]),
        ("Ping @example.com or @@b.example.org now.", ["@example.com", "@@b.example.org"]),
    ],
)
def test_an_address_like_run_is_protected_whole_or_not_at_all(text, expected):
    assert spans_of(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Open Https://x.org/page or HTTP://X.ORG now.", ["Https://x.org/page", "HTTP://X.ORG"]),
        (
            "See WWW.Example.COM, GitHub.com or MAILTO:a@b.org.",
            ["WWW.Example.COM", "GitHub.com", "MAILTO:a@b.org"],
        ),
        (
            "Sites like Rust-Lang.org/Learn and PULSE.CIO.GOV are kept.",
            ["Rust-Lang.org/Learn", "PULSE.CIO.GOV"],
        ),
        # a capitalised word after a period is a sentence, its space missing, not a domain
        ("I live in Paris. It is big. It was big.It was old.In Paris.No.", []),
    ],
)
def test_urls_and_domains_are_found_in_any_case(text, expected):
    assert spans_of(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Ping a@www.b.com@c or a@https://x.org now.", []),  # www.b.com@c, https://x.org before
        ("Ping @https://x.org or @@www.b.com now.", ["@https://x.org", "@@www.b.com"]),
        ("Ping a.https://x.org or www.a@b.com now.", ["a.https://x.org", "www.a@b.com"]),
    ],
)
def test_a_url_in_an_address_like_run_is_protected_whole_or_not_at_all(text, expected):
    assert spans_of(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Mail a@b.com/x or a@b.com/ now.", ["a@b.com/x", "a@b.com/"]),  # "/x now." went to the model
        ("It is at a@b.com/x. See example.com/ too.", ["a@b.com/x", "example.com/"]),
        ("Note: see example.com. Mail a@b.com.", ["example.com", "a@b.com"]),
    ],
)
def test_an_address_or_domain_with_a_path_is_protected_whole(text, expected):
    assert spans_of(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Use example.com:8080 or X.ORG:443/a/b now.", ["example.com:8080", "X.ORG:443/a/b"]),
        (
            "Open example.com:8080. Then x.org:1/ and y.org:65535?",
            ["example.com:8080", "x.org:1/", "y.org:65535"],
        ),
        # no port: a word after the digits, six digits, one field of a:b:c, a colon ending a clause
        ("See x.org:80s, x.org:123456, x.org:10:30 or x.org: it.", ["x.org", "x.org", "x.org", "x.org"]),
    ],
)
def test_a_domains_port_is_protected_with_it(text, expected):
    assert spans_of(text) == expected


def test_a_domains_port_is_never_sent_to_the_model():
    doc = parse_text("Use host.com:8080/path now.\n", "txt")  # ":8080/path now." went to the model
    assert [s.text for s in doc.segments] == ["Use", "now."]
    assert doc.render(["使用", "现在。"]) == "使用 host.com:8080/path 现在。\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Clone git@github.com:user/repo.git now.", ["git@github.com:user/repo.git"]),  # ":user/..." was text
        (
            "Push to deploy@10.0.0.1:/srv/app or me@x.org:~/src.",
            ["deploy@10.0.0.1:/srv/app", "me@x.org:~/src"],
        ),
        ("Mail a@b.com: it works. Mail c@d.org:", ["a@b.com", "c@d.org"]),  # a colon ending a clause is prose
    ],
)
def test_an_scp_like_git_remote_is_protected_whole(text, expected):
    assert spans_of(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Load //cdn.example.com/x.js now.", ["//cdn.example.com/x.js"]),  # "Load //" was text
        ('Use <script src="//CDN.Example.COM/a.js"> or (//x.org).', ["//CDN.Example.COM/a.js", "(//x.org)"]),
        ("Comments start with // in C. A//b.com, 1//2 and //home/me are no URLs.", ["b.com"]),
    ],
)
def test_a_protocol_relative_url_is_protected_whole(text, expected):
    assert spans_of(text) == expected


@pytest.mark.parametrize("char", "-._~!$&'()*+,;=%:")
@pytest.mark.parametrize("password", ["pa{}ss", "pass{}", "{}pass", "{}"])
@pytest.mark.parametrize("url", ["https://user:{}@host.com/path", "ftp://{}@host.com"])
def test_a_password_in_a_url_is_protected_with_it_whatever_it_holds(char, password, url):
    """A quote, a sub-delimiter of RFC 3986, in a URL's user or password ended the URL:
    "See ftp://'" went to the model, and the output lost "ftp://"."""
    url = url.format(password.format(char))
    assert spans_of(f"See {url} now.") == [url]
    doc = parse_text(f"See {url} now.\n", "txt")
    assert [s.text for s in doc.segments] == ["See", "now."]
    assert doc.render(["见", "现在。"]) == f"见 {url} 现在。\n"


def test_a_quote_after_a_urls_host_still_ends_it():
    text = "Set href='https://x.org/a' or 'https://a@x.org'."
    assert spans_of(text) == ["https://x.org/a", "https://a@x.org"]


def test_a_label_before_an_address_without_a_space_stays_text():
    """ "Email:a@b.com" keeps its label for the model: a user and password before an address
    without a scheme look the same and are rare in prose, so they are not read as one."""
    assert spans_of("Email:a@b.com or Contact us:john@x.com today.") == ["a@b.com", "john@x.com"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "See https://en.wikipedia.org/wiki/Python_(programming_language) for details.",
            ["https://en.wikipedia.org/wiki/Python_(programming_language)"],
        ),
        (
            "See en.wikipedia.org/wiki/Foo_(bar). Or x.org/((a)) now.",
            ["en.wikipedia.org/wiki/Foo_(bar)", "x.org/((a))"],
        ),
        # a ")" the URL did not open is prose: the end of a parenthesis around more than it
        ("A page (see https://x.org/a_(b)) now.", ["https://x.org/a_(b)"]),
        ("Shops (in x.org) and https://x.org/(a now.", ["x.org", "https://x.org/(a"]),
    ],
)
def test_a_url_keeps_the_closing_parentheses_of_its_own(text, expected):
    assert spans_of(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("A page (https://x.org/a) or (www.x.org/a).", ["(https://x.org/a)", "(www.x.org/a)"]),
        ("Shops (x.org), (a@b.com) or (x.org:80/a)!", ["(x.org)", "(a@b.com)", "(x.org:80/a)"]),
        (
            "See (https://en.wikipedia.org/wiki/Python_(language)) or ((x.org)).",
            ["(https://en.wikipedia.org/wiki/Python_(language))", "(x.org)"],
        ),
        ("See (https://x.org/a_(b) or (x.org/a_(b)", ["https://x.org/a_(b)", "x.org/a_(b)"]),
    ],
)
def test_a_parenthesis_around_exactly_a_url_is_protected_with_it(text, expected):
    assert spans_of(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Mail <a@b.com> or see <https://x.org/a>.", ["<a@b.com>", "<https://x.org/a>"]),
        ("Shops <x.org> and <x.org:80/a>!", ["<x.org>", "<x.org:80/a>"]),
        ("See <https://x.org/a now> or <b x.org>.", ["https://x.org/a", "x.org"]),
    ],
)
def test_angle_brackets_around_exactly_a_url_are_protected_with_it(text, expected):
    assert spans_of(text) == expected


@pytest.mark.parametrize(
    ("text", "segments", "translations", "output"),
    [
        (  # "A page (" and ") now." went to the model, which dropped the parentheses
            "A page (https://x.org/a) now.",
            ["A page", "now."],
            ["一页", "现在。"],
            "一页 (https://x.org/a) 现在。",
        ),
        (
            "A page (see https://x.org/a) now.",
            ["A page (see", ") now."],
            ["一页（见", "）现在。"],
            "一页（见 https://x.org/a）现在。",
        ),
        ("(https://x.org/a) Now.", ["Now."], ["现在。"], "(https://x.org/a) 现在。"),
        (  # "Mail" + " <" and "> now." went to the model, which dropped the brackets
            "Mail <a@b.com> now.",
            ["Mail", "now."],
            ["邮件", "现在。"],
            "邮件 <a@b.com> 现在。",
        ),
    ],
)
def test_a_url_in_parentheses_is_rendered_once_with_them(text, segments, translations, output):
    doc = parse_text(text + "\n", "txt")
    assert [s.text for s in doc.segments] == segments
    assert doc.render(translations) == output + "\n"


def test_an_address_like_run_is_never_cut_into_text_for_the_model():
    doc = parse_text("Write to a@b@c.com today.\n", "txt")
    assert [s.text for s in doc.segments] == ["Write to", "today."]  # "Write to a@" before
    doc = parse_text("Write to a@b.com@c today.\n", "txt")
    assert [s.text for s in doc.segments] == ["Write to a@b.com@c today."]  # "Write to a@", "@c today."
    doc = parse_text("Write to b.com:x@c today.\n", "txt")
    assert [s.text for s in doc.segments] == ["Write to b.com:x@c today."]  # "Write to", ":x@c today."
    doc = parse_text("Write to b.com:x@c.org today.\n", "txt")
    assert [s.text for s in doc.segments] == ["Write to", "today."]
    doc = parse_text("Write to a@https://x.org today.\n", "txt")
    assert [s.text for s in doc.segments] == ["Write to a@https://x.org today."]  # "Write to a@", "today."


@pytest.mark.parametrize(
    "text",
    [
        *("a@" * 20000, "a@" * 20000 + "b.com", "a." * 20000 + "@", "@a" * 20000, "@a." * 20000 + "com"),
        *("A." * 20000, "A." * 20000 + "COM", "@A." * 20000 + "Com", "WWW." * 20000, "Http" + "A." * 20000),
        *("a@Http" * 20000, "://a." * 20000 + "COM", "a@www." * 20000),
        *("a@b.co/" * 6000, "b.com/." * 6000, "a@b.c" + "/." * 20000),
        *("a@b.c:." * 6000, "a@b.c" + ":." * 20000, "a@b.c:@" * 6000),
        *("a:" * 20000, "a:%" * 13000, "a:%a@" * 8000, "a:b@" * 10000, "a:b@c." * 6000),
        *("/" * 40000, "//a." * 10000, ")//a." * 8000, ")//" * 13000 + "a.b", "//a" * 13000),
        *("a.com:" + "@" * 40000, "a.com:@" * 6000, "a.com:a@" * 5000, "a.com:a@a." * 4000, "a:@" * 13000),
        *("a.com:" * 6000, "a.com:1" * 6000, "a.com:" + "1" * 40000, "a.com:11111" * 4000),
        *("a://" + "a:" * 20000, "a://'" * 8000, "a://a'@" * 6000, "a://" + "@" * 40000),
    ],
)
def test_addresses_are_found_in_linear_time_on_a_long_word_of_at_signs(text):
    started = time.perf_counter()
    protected_spans(text)
    assert time.perf_counter() - started < 0.5  # about 5 ms for these 40,000 characters


def test_user_patterns_add_to_the_built_in_ones_and_overlaps_go_to_the_first():
    text = "Ticket OPS-1234 is closed; see https://x.io/OPS-1234."
    assert spans_of(text, (r"\bOPS-\d+\b",)) == ["OPS-1234", "https://x.io/OPS-1234"]
    assert spans_of(text, (r"Ticket OPS",)) == ["Ticket OPS", "https://x.io/OPS-1234"]


@pytest.mark.parametrize(
    ("text", "url"),
    [
        ("Open https://example.com/page?x=1 now. Then go.", "https://example.com/page?x=1"),
        ("The url is https://a.b/x?y. Is it?", "https://a.b/x?y"),
        ("See https://example.com/a?b=1#top! Then go.", "https://example.com/a?b=1#top"),
    ],
)
def test_sentence_splitting_never_cuts_inside_a_protected_span(text, url):
    assert len(split_sentences(text)) == 3  # pysbd alone cuts the URL at its '?'
    kept = split_sentences(text, protected_spans(text))
    assert len(kept) == 2 and url in text[kept[0][0] : kept[0][1]]


def test_text_between_protected_spans_is_translated_around_them():
    doc = parse_text("Visit https://example.com/page?x=1 for more. Mail a@b.org today.\n", "txt")
    assert [s.text for s in doc.segments] == ["Visit", "for more.", "Mail", "today."]
    assert doc.render(["访问", "了解更多。", "写信给", "今天。"]) == (
        "访问 https://example.com/page?x=1 了解更多。写信给 a@b.org 今天。\n"
    )


@pytest.mark.parametrize(
    ("content", "kept"),
    [
        ("Hello world. https://x.org is nice.\n", "https://x.org"),
        ("Read this. 李明 is my friend.\n", "李明"),
        ("It costs money. &copy; 2020 Acme Inc. All rights reserved.\n", "&copy;"),
        ("Call now. {{ page.code }} is the code.\n", "{{ page.code }}"),
        ("Call now. ACME-123 is the code.\n", "ACME-123"),
    ],
)
@pytest.mark.parametrize("fmt", ["txt", "md"])
def test_a_span_starting_a_sentence_after_another_is_kept(content, kept, fmt):
    # the span lies between two translated sentences: it is text, not the gap Chinese drops
    doc = parse_text(content, fmt, ReadOptions(protect=(r"ACME-\d+",)))
    out = doc.render([f"译文{i}。" for i in range(len(doc.segments))])
    assert out.count(kept) == 1, out
    assert out.startswith("译文0。 " + kept), out


@pytest.mark.parametrize("separator", ["\r", "\x0b", "\x0c", "\x1c", "\x85", "\u2028", "\u2029"])
def test_line_and_page_breaks_other_than_newline_are_kept_and_never_sent(separator):
    content = f"First line here.{separator}Second line here{separator}Third line\n"
    doc = parse_text(content, "txt")
    assert all(separator not in s.text for s in doc.segments)
    out = doc.render([f"译文{i}。" for i in range(len(doc.segments))])
    assert out == f"译文0。{separator}译文1。{separator}译文2。\n"


@pytest.mark.parametrize("space", [" ", "  ", "\u00a0 ", "\u3000", "\u202f"])
def test_any_space_but_a_tab_between_two_chinese_sentences_is_dropped(space):
    doc = parse_text(f"Hello there.{space}Good morning.\n", "txt")
    assert doc.render(["你好。", "早上好。"]) == "你好。早上好。\n"


def test_a_unit_separator_between_two_sentences_is_kept():
    doc = parse_text("Hello world.\x1fGood morning.\n", "txt")
    assert doc.render(["你好。", "早上好。"]) == "你好。\x1f早上好。\n"


def test_a_tab_between_two_sentences_is_kept():
    doc = parse_text("Hello world.\tGood morning. Bye now.\n", "txt")
    assert doc.render(["你好。", "早上好。", "再见。"]) == "你好。\t早上好。再见。\n"


def test_a_line_of_protected_spans_or_numbers_alone_is_not_translated():
    content = (
        "https://www.gutenberg.org/ebooks/98?format=txt\n2016\n{{ page.title }}\n1,024.5\n(801) 596-1887\n"
    )
    doc = parse_text(content, "txt")
    assert doc.segments == []
    assert [s.text for s in parse_text("Chapter 12 has 1,024 words.\n", "txt").segments] == [
        "Chapter 12 has 1,024 words."  # numbers inside a sentence go to the model with it
    ]


def translated(name: str, tiny_bundle: Path, tmp_path: Path) -> tuple[str, str]:
    """The text of tests/data/NAME and what `transqueue translate` writes for it."""
    out = tmp_path / f"zh-{name}"
    args = ["translate", str(DATA / name), "-o", str(out), "--model", str(tiny_bundle)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    return (DATA / name).read_text(), out.read_text()


def test_jekyll_post_keeps_every_template_tag_link_target_and_span(tiny_bundle, tmp_path):
    source, output = translated("jekyll_post.md", tiny_bundle, tmp_path)
    tags = re.findall(r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}", source)
    assert len(tags) == 9 and all(output.count(tag) == source.count(tag) for tag in tags)
    targets = re.findall(r"\]\(([^)]*\}\}[^)]*|[^)\s]+)\)", source)
    assert len(targets) == 3 and all(f"]({target})" in output for target in targets)
    for kept in (
        '---\nlayout: post\ntitle: "Shipping the new dashboard"\npermalink: /blog/new-dashboard/\n---\n',
        "{% include toc.html %}\n",
        "[pulse.cio.gov](https://pulse.cio.gov/data/domains/https.csv?sort=desc#top)",
        "![",
        "data-team@example.org &mdash;",
        "`make serve`",
        "http://localhost:4000/blog/?draft=1",
        "{% if site.comments %}\n",
        "\n{% endif %}\n",
    ):
        assert kept in output
    for segment in read_whole(DATA / "jekyll_post.md").segments:
        assert not re.search(r"\{[{%#]|https?:|@|&\w+;|`", segment.text)


def test_gutenberg_footer_keeps_every_url_domain_and_address(tiny_bundle, tmp_path):
    source, output = translated("gutenberg_footer.txt", tiny_bundle, tmp_path)
    addresses = re.findall(r"(?:https?://|www\.)\S*[^\s.]|\S+@\S+\.org", source)
    assert len(addresses) == 9
    assert all(address in output for address in addresses)
    lines = output.splitlines()
    assert len(lines) == len(source.splitlines())
    assert lines[-2:] == ["https://www.gutenberg.org/ebooks/98?format=txt&mirror=1", "2016"]
    assert "        http://www.gutenberg.org/9/98/" in lines


def test_protect_option_keeps_what_the_user_names(tiny_bundle, tmp_path, monkeypatch):
    (tmp_path / "in.txt").write_text("Ticket OPS-1234 and build 7f3a9c are fixed.\n")
    monkeypatch.setattr(defaults, "PROTECT_PATTERNS", (r"\b[0-9a-f]{6}\b",))  # TRANSQUEUE_PROTECT
    args = [
        "translate",
        str(tmp_path / "in.txt"),
        "-o",
        str(tmp_path / "out.txt"),
        "--model",
        str(tiny_bundle),
    ]
    result = CliRunner().invoke(main, [*args, "--protect", r"\bOPS-\d+\b"])
    assert result.exit_code == 0, result.output
    output = (tmp_path / "out.txt").read_text()
    assert " OPS-1234 " in output and " 7f3a9c " in output


@pytest.mark.parametrize("command", ["translate", "scheduler"])
def test_a_bad_transqueue_protect_is_one_line_naming_the_variable(command, tmp_path, monkeypatch):
    """It said `--protect` (a usage error for translate), and the scheduler started and
    listed every file of its inbox as invalid, run after run."""
    import cli.service

    (tmp_path / "in.txt").write_text("Hello.\n")
    (tmp_path / "schedule.json").write_text(
        json.dumps(
            {"inbox": [{"name": "a", "inbox": str(tmp_path), "outbox": str(tmp_path / "o"), "schedule": 60}]}
        )
    )
    monkeypatch.setenv("TRANSQUEUE_SCHEDULE", str(tmp_path / "schedule.json"))
    monkeypatch.setattr(defaults, "PROTECT_PATTERNS", ("(unclosed",))  # TRANSQUEUE_PROTECT
    monkeypatch.setattr(cli.service, "run_celery_worker", lambda *args: pytest.fail("the scheduler started"))
    args = [str(tmp_path / "in.txt"), "-o", str(tmp_path / "out.txt")] if command == "translate" else []
    result = CliRunner().invoke(main, [command, *args])
    assert result.exit_code == 1
    assert result.output.splitlines() == [
        "Error: TRANSQUEUE_PROTECT '(unclosed': not a regular expression "
        "(missing ), unterminated subpattern at position 0)"
    ]


@pytest.mark.parametrize(
    ("fmt", "content", "options"),
    [
        ("txt", "See OPS-12 now.\n", {}),
        ("md", "See OPS-12 now.\n", {}),
        ("jsonl", '{"t": "See OPS-12 now."}\n', {"fields": ("t",)}),
        ("csv", "t\nSee OPS-12 now.\n", {"columns": ("t",)}),
        ("tsv", "t\nSee OPS-12 now.\n", {"columns": ("t",)}),
    ],
)
def test_the_users_patterns_are_protected_in_every_text_format(fmt, content, options):
    doc = parse_text(content, fmt, ReadOptions(protect=(r"OPS-\d+",), **options))
    assert [segment.text for segment in doc.segments] == ["See", "now."]


@pytest.mark.parametrize(
    ("pattern", "why"), [("(unclosed", "not a regular expression"), ("x*", "matches empty")]
)
def test_a_bad_protect_pattern_is_a_usage_error_naming_it(tmp_path, pattern, why):
    (tmp_path / "in.txt").write_text("Hello.\n")
    result = CliRunner().invoke(main, ["translate", str(tmp_path / "in.txt"), "--protect", pattern])
    assert result.exit_code == 2
    assert pattern in result.output and why in result.output and "Traceback" not in result.output


def test_text_already_in_chinese_is_copied_and_cjk_names_in_english_survive():
    content = "你好，世界。\n我用 Python 写代码。\nMy friend 李明 lives in Beijing.\n"
    doc = parse_text(content, "txt")
    assert [s.text for s in doc.segments] == ["My friend", "lives in Beijing."]
    assert (
        doc.render(["我的朋友", "住在北京。"])
        == "你好，世界。\n我用 Python 写代码。\n我的朋友 李明 住在北京。\n"
    )
    assert cjk_ratio("你好，世界。") == 1.0 > defaults.PASS_THROUGH_CJK_RATIO
    assert (
        cjk_ratio("我用 Python 写代码。")
        > defaults.PASS_THROUGH_CJK_RATIO
        > cjk_ratio("My friend 李明 lives.")
    )


@pytest.mark.parametrize(
    ("fmt", "content", "first"),
    [
        ("txt", "Hello there.\nBye.\n", "Hello there."),
        ("md", "# Heading one\n\nSome text.\n", "Heading one"),
        ("jsonl", '{"text": "Hello there."}\n', "Hello there."),
    ],
)
def test_the_bom_is_kept_and_never_sent_to_the_model(fmt, content, first):
    doc = parse_text("\ufeff" + content, fmt, ReadOptions(fields=("text",)))
    assert doc.segments[0].text == first and not any("\ufeff" in s.text for s in doc.segments)
    assert doc.segments[0].start == 1 + content.index(first)
    output = doc.render(["译文"] * len(doc.segments))
    assert output.startswith("\ufeff") and output.count("\ufeff") == 1
    if fmt == "md":
        assert output.startswith("\ufeff# 译文\n")
    if fmt == "jsonl":
        assert json.loads(output[1:]) == {"text": "译文"}
    stored = load_document(dump_document(doc), "doc")
    assert stored.render(["译文"] * len(doc.segments)) == output


def test_stored_layout_renders_protected_spans_and_marks_as_translate_does():
    doc = read_whole(DATA / "jekyll_post.md")
    translations = [f"〔{i}〕" for i in range(len(doc.segments))]
    assert load_document(dump_document(doc), "post").render(translations) == doc.render(translations)
