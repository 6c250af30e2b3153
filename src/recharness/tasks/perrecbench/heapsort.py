"""Heapsort over an asynchronous comparator, counting comparisons.

Pairwise ranking asks the model one question per comparison, so the number
of comparisons is the cost.  This is the textbook max-heap sort the
PerRecBench code uses (build the heap, then extract the maximum n-1 times),
written iteratively and awaiting the comparator, so it makes exactly the
same comparisons in the same order.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import lru_cache


async def heapsort(n: int, greater: Callable[[int, int], Awaitable[bool]]) -> tuple[list[int], int]:
    """Sort 0..n-1 best first; `greater(a, b)` says a ranks above b. Returns (order, comparisons)."""
    arr = list(range(n))
    count = 0

    async def gt(a: int, b: int) -> bool:
        nonlocal count
        count += 1
        return await greater(a, b)

    async def sift(size: int, i: int) -> None:
        while True:
            largest, left, right = i, 2 * i + 1, 2 * i + 2
            if left < size and await gt(arr[left], arr[largest]):
                largest = left
            if right < size and await gt(arr[right], arr[largest]):
                largest = right
            if largest == i:
                return
            arr[i], arr[largest] = arr[largest], arr[i]
            i = largest

    for i in range(n // 2 - 1, -1, -1):
        await sift(n, i)
    for end in range(n - 1, 0, -1):
        arr[0], arr[end] = arr[end], arr[0]
        await sift(end, 0)
    return arr[::-1], count


@lru_cache(maxsize=None)
def _max_sift(i: int, size: int) -> int:
    left, right = 2 * i + 1, 2 * i + 2
    if left >= size:
        return 0
    if right >= size:
        return 1 + _max_sift(left, size)
    return 2 + max(_max_sift(left, size), _max_sift(right, size))


def max_comparisons(n: int) -> int:
    """Worst-case comparisons of `heapsort` for n items, over every possible comparator answer.

    Each sift-down's comparisons depend only on heap positions, so the worst
    case is the sum of each sift's longest path: O(n log n).
    """
    build = sum(_max_sift(i, n) for i in range(n // 2 - 1, -1, -1))
    extract = sum(_max_sift(0, end) for end in range(n - 1, 0, -1))
    return build + extract
