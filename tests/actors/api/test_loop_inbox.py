"""The loop inbox: other threads' futures handed to an asyncio loop in batches, with their
outcome (result, error, cancellation), and one wake-up of the loop for many of them."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Any

import pytest

from actors.api.loop_inbox import LoopInbox


def test_results_errors_and_cancellations_arrive_as_they_were_set() -> None:
    async def main() -> list[Any]:
        inbox = LoopInbox(asyncio.get_running_loop())
        sources: list[concurrent.futures.Future[int]] = [
            concurrent.futures.Future() for _ in range(3)
        ]
        waiters = [inbox.wrap(source) for source in sources]

        def settle() -> None:  # on another thread, as the link's reader does
            sources[0].set_result(7)
            sources[1].set_exception(KeyError("gone"))
            sources[2].cancel()

        threading.Thread(target=settle).start()
        return await asyncio.gather(*waiters, return_exceptions=True)

    result, error, cancelled = asyncio.run(main())
    assert result == 7
    assert isinstance(error, KeyError)
    assert isinstance(cancelled, asyncio.CancelledError)


def test_a_future_done_before_it_is_wrapped_arrives_too() -> None:
    async def main() -> str:
        done: concurrent.futures.Future[str] = concurrent.futures.Future()
        done.set_result("early")
        return await LoopInbox(asyncio.get_running_loop()).wrap(done)

    assert asyncio.run(main()) == "early"


def test_many_answers_set_together_wake_the_loop_once() -> None:
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
        sources: list[concurrent.futures.Future[int]] = [
            concurrent.futures.Future() for _ in range(100)
        ]
        waiters = [inbox.wrap(source) for source in sources]
        # One reader thread sets a batch of answers while the loop is busy elsewhere.
        reader = threading.Thread(target=lambda: [s.set_result(i) for i, s in enumerate(sources)])
        reader.start()
        reader.join()
        return await asyncio.gather(*waiters), wakes

    results, wakes = asyncio.run(main())
    assert results == list(range(100))
    assert wakes == 1


def test_a_waiter_given_up_is_skipped_and_the_rest_still_arrive() -> None:
    async def main() -> int:
        inbox = LoopInbox(asyncio.get_running_loop())
        slow: concurrent.futures.Future[int] = concurrent.futures.Future()
        quick: concurrent.futures.Future[int] = concurrent.futures.Future()
        abandoned = inbox.wrap(slow)
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.01):
                await abandoned
        waiter = inbox.wrap(quick)
        slow.set_result(1)  # after its waiter gave up: dropped, not an InvalidStateError
        quick.set_result(2)
        return await waiter

    assert asyncio.run(main()) == 2
