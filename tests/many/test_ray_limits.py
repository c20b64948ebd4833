"""The cluster's endpoint desk (the body of its Ray actor, driven here on one loop): slots a lost
attempt held or was still queued for go to the attempts that live."""

from __future__ import annotations

import asyncio
from collections import Counter

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


class _LocalHandle:
    """TEST DOUBLE: a desk body behind ``handle.method.remote(...)`` on this loop (what a Ray actor
    handle offers), counting the calls each method gets."""

    def __init__(self, desk: EndpointDesk) -> None:
        self.desk, self.calls = desk, Counter()

    def __getattr__(self, name: str):
        method = getattr(self.desk, name)

        class _Remote:
            @staticmethod
            def remote(*args):
                self.calls[name] += 1
                result = method(*args)
                if asyncio.iscoroutine(result):
                    return asyncio.ensure_future(result)
                done = asyncio.get_running_loop().create_future()
                done.set_result(result)
                return done

        return _Remote()


def test_a_lease_takes_what_is_free_and_counts_it_against_the_cap() -> None:
    async def run() -> tuple[int, dict, dict]:
        desk = EndpointDesk()
        got = await desk.lease("e", 3, "a", 5)                   # asks for 5: 3 are free
        queued = asyncio.create_task(desk.lease("e", 3, "b", 2))
        await asyncio.sleep(0)
        full = desk.state("e")
        desk.give_back("e", "a", 1)
        return got, full, {"b": await asyncio.wait_for(queued, 60), **desk.state("e")}

    got, full, after = asyncio.run(run())
    assert got == 3 and full == {"held": 3, "waiting": 1, "peak": 3}
    assert after == {"b": 1, "held": 3, "waiting": 0, "peak": 3}  # b got the one a gave back, no more


def test_a_lease_for_an_ended_attempt_gets_nothing_and_holds_nothing() -> None:
    async def run() -> tuple[int, dict]:
        desk = EndpointDesk()
        desk.release_all("gone#1")
        return await desk.lease("e", 2, "gone#1", 2), desk.state("e")

    got, state = asyncio.run(run())
    assert got == 0 and state["held"] == 0


def test_leased_slots_hold_the_cap_across_attempts_and_save_desk_round_trips() -> None:
    from veriscale.many.ray_limits import _LeasedSlots

    async def run() -> tuple[int, int, Counter, dict]:
        handle = _LocalHandle(EndpointDesk())
        attempts = [_LeasedSlots(handle, "e", 2, f"attempt#{i}") for i in range(2)]
        in_flight = peak = done = 0

        async def call(slots: _LeasedSlots) -> None:
            nonlocal in_flight, peak, done
            await slots.acquire()
            in_flight += 1
            peak = max(peak, in_flight)
            await asyncio.sleep(0)
            in_flight -= 1
            done += 1
            slots.release()

        await asyncio.wait_for(asyncio.gather(*(call(attempts[i % 2]) for i in range(40))), 60)  # a hang guard only
        await asyncio.sleep(0.2)  # past the idle time: unused leases go back
        return peak, done, handle.calls, handle.desk.state("e")

    peak, done, calls, state = asyncio.run(run())
    assert done == 40 and peak <= 2 and state["peak"] <= 2
    assert calls["lease"] < 40  # most calls reused a leased slot instead of asking the desk
    assert state["held"] == 0   # and every slot went back once unused


def test_a_holder_nobody_frees_keeps_no_idle_lease() -> None:
    from veriscale.many.ray_limits import _LeasedSlots

    async def run() -> tuple[dict, dict]:
        handle = _LocalHandle(EndpointDesk())
        slots = _LeasedSlots(handle, "e", 2, "replica#1", idle_s=0)  # a reward replica: its pool may be killed
        await slots.acquire()
        during = handle.desk.state("e")
        slots.release()  # no call here wants it: back at the desk now, not after an idle wait
        return during, handle.desk.state("e")

    during, after = asyncio.run(run())
    assert during["held"] == 1 and after["held"] == 0
