"""The coarser rings of a queue's figures: its minutes summed per 10 minutes and per hour,
for the admin's 24-hour and 7-day charts (docs/admin.md, "Queue").

The stats hash keeps 64 minutes (``lua/_series.lua``). :meth:`Stats.roll_up
<django_zqueue.engine.stats.Stats.roll_up>` (the scanner calls it once a minute per queue)
sums them into ``{p:q}:roll10`` (one slot per 10 minutes, :data:`RINGS` slots: a day and
an hour) and those into ``{p:q}:roll60`` (one slot per hour: a week and two hours). Each
ring has the stats ring's layout: slot ``i`` holds the bucket it counts (``m<i>``: minutes
since the epoch // the bucket's minutes) and one field per series (``e<i>`` enqueued,
``a<i>`` acked, ``f<i>`` failed, ``d<i>`` dead, ``t<i>`` run ms, ``r<i>`` the last depth
sampled in it, absent when none was). A bucket is recomputed whole from its source while
all its source slots are still held, so a roll-up run twice (two scanners) writes the
same; a bucket no roll-up saw is absent, a gap on a chart, never a zero. Both keys are
optional (a queue older than them, or no scanner, has none) and expire a week and a day
after the last roll-up.
"""

from __future__ import annotations

from collections.abc import Mapping

#: minutes per bucket -> the slots of its ring
RINGS = {10: 150, 60: 170}
#: the counted series (summed); ``r`` (the depth) is sampled: the bucket's last sample
COUNTED = ("e", "a", "f", "d", "t")
#: the roll-up keys expire this long after the last roll-up
KEEP_SECONDS = 8 * 86_400
#: the slots of the minute ring (``lua/_series.lua``)
MINUTE_RING = 64
#: the hourly buckets recomputed at each roll-up (from the 10-minute ring)
HOURS_BACK = 2


def roll(
    source: Mapping[str, int], now: int, size: int, ring_in: int, ring_out: int, span: int
) -> tuple[dict[str, int], list[str]]:
    """The fields to write (and the depth fields to delete) of the buckets of ``size``
    source units whose every unit is one of the last ``span`` (``now - span + 1`` to
    ``now``, the units ``source`` still holds, a ring of ``ring_in`` slots); a bucket
    with no live source slot is left alone. Bounded: ``span`` units read."""
    out: dict[str, int] = {}
    drop: list[str] = []
    first = -(-(now - span + 1) // size)  # the first bucket whose units are all held
    for bucket in range(first, now // size + 1):
        sums = dict.fromkeys(COUNTED, 0)
        depth: int | None = None
        live = False
        for unit in range(bucket * size, min((bucket + 1) * size, now + 1)):
            slot = unit % ring_in
            if source.get(f"m{slot}") != unit:
                continue
            live = True
            for s in COUNTED:
                sums[s] += source.get(f"{s}{slot}", 0)
            if f"r{slot}" in source:
                depth = source[f"r{slot}"]
        if not live:
            continue
        slot = bucket % ring_out
        out[f"m{slot}"] = bucket
        out.update({f"{s}{slot}": v for s, v in sums.items()})
        if depth is None:
            drop.append(f"r{slot}")
        else:
            out[f"r{slot}"] = depth
    return out, drop


def roll_up(
    stats: Mapping[str, int], tens: Mapping[str, int], now_minute: int
) -> dict[int, tuple[dict[str, int], list[str]]]:
    """What one roll-up writes, by the buckets' minutes (10, 60): the 10-minute buckets
    from the minute ring ``stats``, then the last hours from the 10-minute ring ``tens``
    (as it will be after that write)."""
    ten, ten_drop = roll(stats, now_minute, 10, MINUTE_RING, RINGS[10], MINUTE_RING)
    after = {k: v for k, v in tens.items() if k not in ten_drop}
    after.update(ten)
    hour = roll(after, now_minute // 10, 6, RINGS[10], RINGS[60], 6 * HOURS_BACK)
    return {10: (ten, ten_drop), 60: hour}
