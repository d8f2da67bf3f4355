"""Property-based tests of the work queue's guarantees (hypothesis).

- a key is never handed to two workers at once;
- an add while a key is processed yields exactly one more delivery, after ``done``;
- nothing is lost: every add is followed by a delivery, and no delivery comes without an add;
- items come out in the order they became dirty;
- shutdown hands out what is queued; shutdown-with-drain returns only when nothing is processed.
"""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kubeop.queue import QueueShutDown, WorkQueue

ITEMS = st.integers(min_value=0, max_value=5)


class WorkQueueMachine(RuleBasedStateMachine):
    """Random add / get / done / shut_down against a model of which keys are owed a delivery."""

    def __init__(self) -> None:
        super().__init__()
        self.q: WorkQueue[int] = WorkQueue()
        self.held: set[int] = set()  # handed out, not done yet
        self.owed: set[int] = set()  # added since last handed out
        self.order: list[int] = []  # the model's FIFO of queued items
        self.shut = False

    @rule(item=ITEMS)
    def add(self, item: int) -> None:
        self.q.add(item)
        if self.shut or item in self.owed:
            return
        self.owed.add(item)
        if item not in self.held:
            self.order.append(item)

    @rule()
    def get(self) -> None:
        try:
            item = self.q.get_nowait()
        except asyncio.QueueEmpty:
            assert not self.shut and not self.order
            return
        except QueueShutDown:
            assert self.shut and not self.order
            return
        assert item not in self.held, "handed to two workers at once"
        assert item in self.owed, "delivered without an add"
        assert item == self.order.pop(0), "not FIFO"
        self.owed.remove(item)
        self.held.add(item)

    @rule(data=st.data())
    def done(self, data: st.DataObject) -> None:
        if not self.held:
            return
        item = data.draw(st.sampled_from(sorted(self.held)))
        self.q.done(item)
        self.held.remove(item)
        if item in self.owed:
            self.order.append(item)

    @rule()
    def shut_down(self) -> None:
        self.q.shut_down()
        self.shut = True

    @invariant()
    def queue_length_matches(self) -> None:
        assert len(self.q) == len(self.order)

    def teardown(self) -> None:
        # Finish all work, then drain: every owed key must come out exactly once.
        for item in sorted(self.held):
            self.q.done(item)
        self.q.shut_down()
        delivered = []
        while True:
            try:
                item = self.q.get_nowait()
            except QueueShutDown:
                break
            delivered.append(item)
            self.q.done(item)
        assert sorted(delivered) == sorted(self.owed)


TestWorkQueueMachine = WorkQueueMachine.TestCase
TestWorkQueueMachine.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)


@settings(max_examples=100, deadline=None)
@given(adds_while_processing=st.integers(min_value=1, max_value=10), others=st.lists(ITEMS, max_size=5))
def test_adds_while_processing_give_exactly_one_more_delivery(
    adds_while_processing: int, others: list[int]
) -> None:
    q: WorkQueue[int] = WorkQueue()
    q.add(-1)
    assert q.get_nowait() == -1
    for i in range(adds_while_processing):
        q.add(-1)
        if i < len(others):
            q.add(others[i])
    q.done(-1)
    q.shut_down()
    delivered = []
    while True:
        try:
            item = q.get_nowait()
        except QueueShutDown:
            break
        delivered.append(item)
        q.done(item)
    assert delivered.count(-1) == 1
    assert sorted(delivered) == sorted({-1, *others[:adds_while_processing]})


# A script of (key, pauses): add the key, then yield to the loop `pauses` times.
SCRIPT = st.lists(st.tuples(ITEMS, st.integers(min_value=0, max_value=3)), max_size=40)


@settings(max_examples=60, deadline=None)
@given(
    script=SCRIPT,
    workers=st.integers(min_value=1, max_value=4),
    work=st.lists(st.integers(min_value=0, max_value=4), min_size=1, max_size=8),
    drain=st.booleans(),
)
def test_concurrent_workers(
    script: list[tuple[int, int]], workers: int, work: list[int], drain: bool
) -> None:
    """Producers and workers interleave on one loop; the guarantees hold for every schedule."""

    async def scenario() -> None:
        q: WorkQueue[int] = WorkQueue()
        active: set[int] = set()
        owed: set[int] = set()
        deliveries = 0

        async def worker() -> None:
            nonlocal deliveries
            async for item in q:
                assert item not in active, "handed to two workers at once"
                assert item in owed, "delivered without an add"
                owed.discard(item)
                active.add(item)
                for _ in range(work[deliveries % len(work)]):
                    await asyncio.sleep(0)
                deliveries += 1
                active.remove(item)
                q.done(item)

        tasks = [asyncio.create_task(worker()) for _ in range(workers)]
        for item, pauses in script:
            q.add(item)
            owed.add(item)
            for _ in range(pauses):
                await asyncio.sleep(0)
        if drain:
            await asyncio.wait_for(q.shut_down_with_drain(), 5)
            assert not active, "drain returned while an item was being processed"
        else:
            q.shut_down()
        await asyncio.wait_for(asyncio.gather(*tasks), 5)
        assert not owed, f"lost: {owed}"
        assert deliveries <= len(script)

    asyncio.run(scenario())


@settings(max_examples=60, deadline=None)
@given(queued=st.lists(ITEMS, max_size=10), waiting=st.integers(min_value=0, max_value=3))
def test_shutdown_hands_out_what_is_queued_then_stops_every_worker(queued: list[int], waiting: int) -> None:
    async def scenario() -> None:
        q: WorkQueue[int] = WorkQueue()
        idle = [asyncio.create_task(q.get()) for _ in range(waiting)]
        await asyncio.sleep(0)
        for item in queued:
            q.add(item)
        q.shut_down()
        q.add(99)  # ignored
        results = await asyncio.gather(*idle, return_exceptions=True)
        got = [r for r in results if isinstance(r, int)]
        assert all(isinstance(r, int | QueueShutDown) for r in results)
        async for item in q:
            got.append(item)
        assert got == list(dict.fromkeys(queued))

    asyncio.run(scenario())
