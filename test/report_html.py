"""Reading robot-memory's HTML report in tests, with the standard library's parser."""

import json
import re
from html.parser import HTMLParser

SECTIONS = {"summary", "rates", "parameters", "zones", "consultations", "health"}


class ReportParser(HTMLParser):
    """Sections, figures (with their caption numbers), table rows with numbers, and every
    attribute that could make the browser fetch something."""

    def __init__(self):
        super().__init__()
        self.sections, self.figures, self.rows, self.fetching = set(), [], [], []
        self.tags, self.ids = set(), []
        self._figure = self._row = None
        self._in_caption = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.add(tag)
        for name, value in attrs.items():
            if name in ("src", "href", "xlink:href", "srcset", "action", "poster") and \
                    not (value or "").startswith("#"):
                self.fetching.append((tag, name, value))
            if name == "style" and re.search(r"url\(\s*(?!#)", value or ""):
                self.fetching.append((tag, name, value))
            if name == "id":
                self.ids.append(value)
        if tag == "section":
            self.sections.add(attrs.get("id"))
        elif tag == "figure":
            self._figure = {"attrs": attrs, "svg": False, "numbers": {}, "caption": ""}
        elif tag == "svg" and self._figure is not None:
            self._figure["svg"] = True
        elif tag == "figcaption":
            self._in_caption = True
        elif tag == "tr" and "data-fact-key" in attrs:
            self._row = {"key": attrs["data-fact-key"], "numbers": {}}
        elif tag == "data":
            target = self._figure if self._in_caption else self._row
            if target is not None:
                target["numbers"][attrs["data-field"]] = json.loads(attrs["value"])

    def handle_endtag(self, tag):
        if tag == "figure":
            self.figures.append(self._figure)
            self._figure = None
        elif tag == "figcaption":
            self._in_caption = False
        elif tag == "tr" and self._row is not None:
            self.rows.append(self._row)
            self._row = None

    def handle_data(self, data):
        if self._in_caption and self._figure is not None:
            self._figure["caption"] += data
