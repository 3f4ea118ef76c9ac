"""An HTML page as a tree, for the tests that read what `laya-qual show --html` wrote: elements
with their attributes and text, found by tag and attribute values. Python's own html.parser,
stricter than a browser: every element that is opened must be closed, in order."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser


@dataclass
class Node:
    tag: str
    attrs: dict[str, str]
    children: list[Node] = field(default_factory=list)
    text: str = ""

    def all(self, tag: str | None = None, **attrs: str) -> list[Node]:
        """Descendants with this tag and these attribute values (``data_x`` for ``data-x``, ``class_``)."""
        want = {k.rstrip("_").replace("_", "-"): v for k, v in attrs.items()}
        found = []
        for child in self.children:
            if (tag is None or child.tag == tag) and all(child.attrs.get(k) == v for k, v in want.items()):
                found.append(child)
            found += child.all(tag, **attrs)
        return found

    def one(self, tag: str | None = None, **attrs: str) -> Node:
        [found] = self.all(tag, **attrs)
        return found

    def content(self) -> str:
        return self.text + "".join(child.content() for child in self.children)


VOID = {"meta", "link", "br", "img", "input", "hr", "area", "base", "col", "embed", "source", "track", "wbr"}


class Tree(HTMLParser):
    def __init__(self, page: str):
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {})
        self.stack = [self.root]
        self.feed(page)
        self.close()
        assert self.stack == [self.root], [n.tag for n in self.stack]

    def handle_starttag(self, tag, attrs):
        node = Node(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(node)
        if tag not in VOID:
            self.stack.append(node)

    def handle_endtag(self, tag):
        assert self.stack[-1].tag == tag, (tag, [n.tag for n in self.stack])
        self.stack.pop()

    def handle_data(self, data):
        self.stack[-1].children.append(Node("#text", {}, text=data))
