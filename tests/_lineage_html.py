"""Reading the lineage trees of an HTML report back (``<ul class="lineage-tree">``): each
``<li>`` a node ``{"text": its own words, "kids": [nodes]}``, as a reader of the page sees
them (the stdlib parser unescapes entities)."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any, Dict, Iterator, List, Optional


class _Trees(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.trees: List[Dict[str, Any]] = []
        self._stack: List[Dict[str, Any]] = []
        self._depth = 0  # <ul> levels inside a tree

    def handle_starttag(self, tag: str, attrs: List[Any]) -> None:
        if tag == "ul" and (self._depth or ("class", "lineage-tree") in attrs):
            self._depth += 1
        elif tag == "li" and self._depth:
            node: Dict[str, Any] = {"text": "", "kids": []}
            if self._stack:
                self._stack[-1]["kids"].append(node)
            else:
                self.trees.append(node)
            self._stack.append(node)

    def handle_endtag(self, tag: str) -> None:
        if tag == "ul" and self._depth:
            self._depth -= 1
        elif tag == "li" and self._depth and self._stack:
            node = self._stack.pop()
            node["text"] = " ".join(node["text"].split())

    def handle_data(self, data: str) -> None:
        if self._stack:
            self._stack[-1]["text"] += data


def trees(page: str) -> List[Dict[str, Any]]:
    """The lineage trees of ``page``, each rooted at the value read."""
    p = _Trees()
    p.feed(page)
    p.close()
    return p.trees


def walk(node: Dict[str, Any], depth: int = 0) -> Iterator[Any]:
    """``(depth, node)`` for ``node`` and every node below it."""
    yield depth, node
    for k in node["kids"]:
        yield from walk(k, depth + 1)


def path_to(node: Dict[str, Any], text: str) -> Optional[List[str]]:
    """The texts from ``node`` down to the first node whose text holds ``text``."""
    if text in node["text"]:
        return [node["text"]]
    for k in node["kids"]:
        p = path_to(k, text)
        if p is not None:
            return [node["text"], *p]
    return None
