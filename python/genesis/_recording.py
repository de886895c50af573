"""Shared use of the allocators' event recording (the event history).

Profiling sessions and leak debugging both need CachingAllocator event
recording (off by default: it costs 50-75 ns per allocation). Each user
acquires it per allocator; the first turns it on, the last turns it back to
what it was before (on, if someone enabled it in C++ directly). Sessions
never clear the allocator's event history: they read events after their own
start time, so overlapping sessions do not disturb each other.
"""

import threading

_lock = threading.Lock()
_users = {}  # allocator key -> (count, was_on_before)


def acquire(allocator):
    with _lock:
        count, was_on = _users.get(allocator.key, (0, None))
        if count == 0:
            was_on = allocator.event_recording
            allocator.set_event_recording(True)
        _users[allocator.key] = (count + 1, was_on)


def release(allocator):
    with _lock:
        count, was_on = _users.get(allocator.key, (0, None))
        if count == 0:
            return
        if count == 1:
            del _users[allocator.key]
            allocator.set_event_recording(bool(was_on))
        else:
            _users[allocator.key] = (count - 1, was_on)
