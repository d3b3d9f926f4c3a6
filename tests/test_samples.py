"""The samples behind the console's charts: rates between consecutive samples, levels at
the later one, and a bounded ring per crawl."""

from __future__ import annotations

from trawl.ops.samples import Sample, Samples


def test_points_are_rates_between_samples_and_the_ring_is_bounded() -> None:
    samples = Samples(kept=3)
    assert samples.points("c1") == []
    figures = [
        (100.0, {"status_2xx": 0, "error:timeout": 0}, 50, 0),
        (102.0, {"status_2xx": 10, "status_4xx": 2, "error:timeout": 4}, 40, 2),
        (103.0, {"status_2xx": 13, "status_4xx": 2, "error:timeout": 4}, 30, 1),
        (105.0, {"status_2xx": 13, "status_4xx": 3, "error:timeout": 4, "error:dns": 1}, 0, 0),
    ]
    for at, counters, queued, backing_off in figures:
        samples.add("c1", Sample(at, counters, queued, backing_off))
    samples.add("c2", Sample(100.0, {"status_2xx": 7}, 1, 0))
    points = samples.points("c1")
    # The first sample fell out of the ring of three: two points are left.
    assert [p.at for p in points] == [103.0, 105.0]
    assert points[0].pages_per_second == {"1xx": 0, "2xx": 3.0, "3xx": 0, "4xx": 0, "5xx": 0}
    assert points[0].errors_per_second == {}
    assert (points[0].queued, points[0].backing_off) == (30, 1)
    assert points[1].pages_per_second["2xx"] == 0
    assert points[1].pages_per_second["4xx"] == 0.5
    assert points[1].errors_per_second == {"dns": 0.5}
    assert samples.points("c2") == []
