"""A stateful property test: random sequences of allocator operations from
Python (allocate, free, streams, empty_cache, compact, limits) keep the
statistics equal to a simple model, and never crash (hypothesis)."""

import pytest

hypothesis = pytest.importorskip("hypothesis", reason="hypothesis (python3-hypothesis) is not installed")
from hypothesis import settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.stateful import Bundle, RuleBasedStateMachine, consumes, invariant, rule  # noqa: E402

import genesis  # noqa: E402
from genesis.testing import SimulatedAllocator  # noqa: E402

MiB = 1 << 20
sizes = st.one_of(st.integers(1, 4096), st.integers(4097, MiB), st.integers(MiB + 1, 64 * MiB))


def rounded(n):
    return (n + 511) // 512 * 512


class AllocatorMachine(RuleBasedStateMachine):
    blocks = Bundle("blocks")

    def __init__(self):
        super().__init__()
        self.sim = SimulatedAllocator("512MiB")
        self.live = {}  # address -> rounded size
        self.streams = [0]
        self.allocs = self.frees = 0

    @rule(target=blocks, n=sizes, which=st.integers(0, 3))
    def allocate(self, n, which):
        stream = self.streams[which % len(self.streams)]
        try:
            p = self.sim.allocate(n, stream=stream)
        except genesis.OutOfMemoryError:
            return hypothesis.stateful.multiple()
        assert p not in self.live
        self.live[p] = rounded(n)
        self.allocs += 1
        return p

    @rule(p=consumes(blocks))
    def free(self, p):
        self.sim.free(p)
        del self.live[p]
        self.frees += 1

    @rule(p=blocks)
    def double_free_is_refused_when_freed(self, p):
        if p not in self.live:
            with pytest.raises(ValueError):
                self.sim.free(p)

    @rule(p=blocks, which=st.integers(0, 3))
    def record_stream(self, p, which):
        if p in self.live:
            self.sim.record_stream(p, self.streams[which % len(self.streams)])

    @rule()
    def create_stream(self):
        if len(self.streams) < 4:
            self.streams.append(self.sim.create_stream())

    @rule()
    def complete_all(self):
        self.sim.complete_all()

    @rule()
    def empty_cache(self):
        self.sim.empty_cache()

    @rule()
    def compact(self):
        self.sim.compact()

    @rule(fraction=st.floats(0.05, 1.0))
    def set_memory_fraction(self, fraction):
        self.sim.set_memory_fraction(fraction)

    @rule(size=st.one_of(st.none(), st.integers(0, 256 * MiB)))
    def set_cache_size(self, size):
        self.sim.set_cache_size(size)

    @invariant()
    def statistics_match_the_model(self):
        stats = self.sim.memory_stats()
        assert stats.allocated_bytes == sum(self.live.values())
        assert stats.allocation_count == len(self.live)
        assert stats.num_allocations == self.allocs and stats.num_frees == self.frees
        assert stats.reserved_bytes >= stats.allocated_bytes
        assert stats.cached_bytes == stats.reserved_bytes - stats.allocated_bytes
        assert stats.peak_allocated >= stats.allocated_bytes
        assert 0.0 <= stats.fragmentation_ratio <= 1.0
        assert self.sim.memory_reserved() <= self.sim.capacity

    @invariant()
    def snapshot_agrees(self):
        allocated = {b["address"]: b["size"] for s in self.sim.memory_snapshot() for b in s["blocks"]
                     if b["state"] == "allocated"}
        assert allocated == self.live


AllocatorMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=40, deadline=None,
                                              database=None)
TestAllocatorMachine = AllocatorMachine.TestCase
