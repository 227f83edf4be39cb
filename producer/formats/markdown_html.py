"""Markdown HTML blocks: which lines open one, and what line ends it.

CommonMark's seven kinds: `<script>`, `<pre>`, `<style>` and `<textarea>`, comments,
processing instructions, declarations and CDATA end at their closing marker (types 1-5); a
block-level tag (type 6) or any other tag alone on its line (type 7) at a blank line. The
block scanner (``producer.formats.markdown``) passes an HTML block through whole.
"""

from __future__ import annotations

import re

#: CommonMark's block-level tags.
_HTML_BLOCK_TAGS = (
    "address|article|aside|base|basefont|blockquote|body|caption|center|col|colgroup|dd|"
    "details|dialog|dir|div|dl|dt|fieldset|figcaption|figure|footer|form|frame|frameset|"
    "h[1-6]|head|header|hr|html|iframe|legend|li|link|main|menu|menuitem|nav|noframes|ol|"
    "optgroup|option|p|param|search|section|summary|table|tbody|td|tfoot|th|thead|title|tr|"
    "track|ul"
)
#: HTML blocks that end at a blank line: CommonMark's type 6 (a block-level tag), which may
#: interrupt a paragraph, and type 7 (any other tag alone on its line), which may not.
_HTML_BLOCK_TAG = re.compile(rf"[ ]{{0,3}}</?(?:{_HTML_BLOCK_TAGS})(?:[ \t]|/?>|$)", re.IGNORECASE)
_HTML_TAG_LINE = re.compile(r"[ ]{0,3}</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?/?>[ \t]*$")  # \s+ was quadratic
#: The end of an HTML block that ends at a blank line (types 6 and 7).
BLANK_LINE = re.compile(r"[ \t]*$")
_HTML_UNTIL_MARKER = (
    (
        re.compile(r"[ ]{0,3}<(?:script|pre|style|textarea)(?:[\s>]|$)", re.I),
        re.compile(r"</(?:script|pre|style|textarea)>", re.I),
    ),
    (re.compile(r"[ ]{0,3}<!--"), re.compile(r"-->")),
    (re.compile(r"[ ]{0,3}<\?"), re.compile(r"\?>")),
    (re.compile(r"[ ]{0,3}<![A-Za-z]"), re.compile(r">")),
    (re.compile(r"[ ]{0,3}<!\[CDATA\["), re.compile(r"\]\]>")),
)


def html_block_end(rest: str, fresh: bool) -> re.Pattern[str] | None:
    """For a line whose text after its container markup (``rest``) opens an HTML block, the
    pattern of the block's last line; else None. Comments, `<script>` and the like and
    block-level tags open one after any line (they interrupt a paragraph); any other tag
    alone on its line only where it interrupts none, ``fresh``."""
    for start, end in _HTML_UNTIL_MARKER:
        if start.match(rest):
            return end
    opens = _HTML_BLOCK_TAG.match(rest) or (fresh and _HTML_TAG_LINE.match(rest))
    return BLANK_LINE if opens else None
