"""The loop inbox: other threads' futures handed to an asyncio loop in batches, settled
whatever their outcome (result, error, cancellation), with one wake-up of the loop for many."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Any

import pytest

from actors.api.loop_inbox import LoopInbox
from tests.cycles import in_a_cycle

Source = concurrent.futures.Future


def test_each_source_arrives_settled_with_its_outcome_and_nothing_is_raised() -> None:
    async def main() -> list[Source[int]]:
        inbox = LoopInbox(asyncio.get_running_loop())
        sources: list[Source[int]] = [Source() for _ in range(3)]
        waiters = [inbox.settled(source) for source in sources]

        def settle() -> None:  # on another thread, as the leader link's reader does
            sources[0].set_result(7)
            sources[1].set_exception(KeyError("gone"))
            sources[2].cancel()

        threading.Thread(target=settle).start()
        settled = await asyncio.gather(*waiters)  # no exception escapes the awaits
        assert settled == sources
        return settled

    result, error, cancelled = asyncio.run(main())
    assert result.result() == 7
    assert isinstance(error.exception(), KeyError)
    assert cancelled.cancelled()


def test_a_source_done_before_it_is_awaited_arrives_too() -> None:
    async def main() -> str:
        done: Source[str] = Source()
        done.set_result("early")
        return (await LoopInbox(asyncio.get_running_loop()).settled(done)).result()

    assert asyncio.run(main()) == "early"


def test_many_sources_settled_together_wake_the_loop_once() -> None:
    async def main() -> tuple[list[int], int]:
        loop = asyncio.get_running_loop()
        inbox = LoopInbox(loop)
        wakes = 0
        real = loop.call_soon_threadsafe

        def counted(*args: Any, **kw: Any) -> Any:
            nonlocal wakes
            wakes += 1
            return real(*args, **kw)

        loop.call_soon_threadsafe = counted  # type: ignore[method-assign]
        sources: list[Source[int]] = [Source() for _ in range(100)]
        waiters = [inbox.settled(source) for source in sources]
        # One reader thread sets a batch of answers while the loop is busy elsewhere.
        reader = threading.Thread(target=lambda: [s.set_result(i) for i, s in enumerate(sources)])
        reader.start()
        reader.join()
        return [done.result() for done in await asyncio.gather(*waiters)], wakes

    results, wakes = asyncio.run(main())
    assert results == list(range(100))
    assert wakes == 1


def test_a_waiter_given_up_is_skipped_and_the_rest_still_arrive() -> None:
    async def main() -> int:
        inbox = LoopInbox(asyncio.get_running_loop())
        slow: Source[int] = Source()
        quick: Source[int] = Source()
        abandoned = inbox.settled(slow)
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.01):
                await abandoned
        waiter = inbox.settled(quick)
        slow.set_result(1)  # after its waiter gave up: dropped
        quick.set_result(2)
        return (await waiter).result()

    assert asyncio.run(main()) == 2


def test_a_source_awaited_twice_settles_both_and_leaves_no_reference_cycle() -> None:
    async def main() -> tuple[Source[int], list[Source[int]]]:
        inbox = LoopInbox(asyncio.get_running_loop())
        source: Source[int] = Source()
        first, second = inbox.settled(source), inbox.settled(source)
        threading.Thread(target=lambda: source.set_result(3)).start()
        settled = await asyncio.gather(first, second)
        assert not inbox._waiters  # forgotten once done
        return source, settled

    source, settled = asyncio.run(main())
    assert settled == [source, source] and source.result() == 3
    # The waiter resolved with its source; the source's callback must not hold the waiter,
    # or every request would leave a cycle for the collector (a frozen heap keeps it).
    assert not in_a_cycle(source)
