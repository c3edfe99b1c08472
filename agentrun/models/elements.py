"""A page of a map's elements, as `status --elements` and `report` show it."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass


@dataclass
class Element:
    key: str
    status: str
    retries: int
    duration_s: float
    output_size: int
    error: str
    output: str | None


@dataclass
class Page:
    map: str
    page: int
    pages: int
    limit: int
    total: int
    elements: list[Element]

    @property
    def first(self) -> int:
        return (self.page - 1) * self.limit

    def heading(self) -> str:
        if not self.elements:
            return f"{self.map}: no elements"
        last = self.first + len(self.elements) - 1
        return f"{self.map}: elements {self.first}–{last} of {self.total}, page {self.page} of {self.pages}"

    def to_json(self) -> str:
        data = {k: v for k, v in asdict(self).items() if k != "elements"}
        return json.dumps({**data, "elements": [asdict(e) for e in self.elements]}, indent=2)
