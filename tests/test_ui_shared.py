"""The inbox's open pages share one look at Temporal per moment (ui.shared): ten pages asking at once
make one read, a later ask after the answer has aged makes another, and a failed read is not kept."""

from __future__ import annotations

import asyncio

import pytest

from agentrun.ui.shared import Shared


class Reads:
    def __init__(self, fail: bool = False) -> None:
        self.count, self.fail = 0, fail

    async def __call__(self) -> int:
        self.count += 1
        await asyncio.sleep(0.05)  # the query takes a while: the other pages come meanwhile
        if self.fail:
            raise RuntimeError("the server is busy")
        return self.count


async def test_pages_asking_together_share_one_read_and_an_aged_answer_is_read_again():
    shared, reads = Shared(max_age_s=0.2), Reads()
    answers = await asyncio.gather(*(shared.get("inbox", reads) for _ in range(10)))
    assert answers == [1] * 10 and reads.count == 1
    assert await shared.get("run r1", reads) == 2  # another page's read is its own
    await asyncio.sleep(0.25)
    assert await shared.get("inbox", reads) == 3


async def test_a_failed_read_is_not_kept():
    shared, failing = Shared(max_age_s=10), Reads(fail=True)
    for _ in range(2):
        with pytest.raises(RuntimeError):
            await shared.get("inbox", failing)
    assert failing.count == 2
