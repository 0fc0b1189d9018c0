#!/usr/bin/env python3
"""table_rows.py DOM_HTML TABLE_ID: prints how many <tr> rows the table with that id has
(header row included), as the HTML parser reads the browser's dumped DOM."""
import html.parser
import sys


class Rows(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.table = None
        self.rows = {}

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table":
            self.table = attrs.get("id")
        if tag == "tr" and self.table:
            self.rows[self.table] = self.rows.get(self.table, 0) + 1

    def handle_endtag(self, tag):
        if tag == "table":
            self.table = None


parser = Rows()
with open(sys.argv[1], encoding="utf-8") as f:
    parser.feed(f.read())
print(parser.rows.get(sys.argv[2], 0))
