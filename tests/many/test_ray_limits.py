"""The cluster's endpoint desk (the body of its Ray actor, driven here on one loop): slots a lost
attempt held or was still queued for go to the attempts that live."""

from __future__ import annotations

import asyncio

from veriscale.many.ray_limits import EndpointDesk


def test_a_lost_attempts_slots_and_queued_acquires_pass_to_the_living() -> None:
    async def run() -> tuple[dict, dict, int]:
        desk = EndpointDesk()
        await desk.acquire("e", 1, "dead#1")                         # the lost attempt holds the one slot
        queued = asyncio.create_task(desk.acquire("e", 1, "dead#1"))  # and waits for another
        living = asyncio.create_task(desk.acquire("e", 1, "live#2"))
        await asyncio.sleep(0)
        before = desk.state("e")
        freed = desk.release_all("dead#1")                           # the driver learns it died
        await asyncio.wait_for(asyncio.gather(queued, living), 60)   # a hang guard only
        return before, desk.state("e"), freed

    before, after, freed = asyncio.run(run())
    assert before == {"held": 1, "waiting": 2, "peak": 1} and freed == 1
    assert after == {"held": 1, "waiting": 0, "peak": 1}  # the living attempt holds it; nothing leaked


def test_release_frees_only_what_the_holder_holds() -> None:
    async def run() -> dict:
        desk = EndpointDesk()
        await desk.acquire("e", 2, "a")
        desk.release("e", "b")  # b holds nothing here: a stray release changes nothing
        return desk.state("e")

    assert asyncio.run(run())["held"] == 1
