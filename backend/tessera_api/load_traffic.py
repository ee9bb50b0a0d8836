"""The load benchmark's traffic: an open-loop schedule of requests and what came back.

Open loop: request *i* is sent at ``start + i / rate`` whether or not earlier ones finished,
and its latency is counted from that planned moment, so time spent queueing (in the server or
in the generator) is part of it. The ingest capacity phase is closed loop instead: each rank
posts its next batch as soon as the previous one was answered, as a rank's reporter does.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import ssl
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import anyio
import httpx

from tessera_api.load_seed import METRICS, RankSlot, Seeded, metric_value

API = "/api/v1"
TIMEOUT_S = 30.0
"""A request not answered in this long counts as an error (``ReadTimeout``)."""
UNFINISHED = "unfinished"
"""The error of a call still waiting when a phase's drain time was up."""

DASHBOARD_MIX: tuple[tuple[str, float], ...] = (
    ("jobs.list", 0.30),
    ("jobs.get", 0.30),
    ("metrics.query", 0.25),
    ("events", 0.15),
)
"""The dashboard's requests and their shares: the jobs page polls its list, a job's page reads
the job, its metric series (1000 points each) and follows its events."""
INGEST = "metrics.ingest"


@dataclass(frozen=True)
class Call:
    """One request: its route's name, method, path and bearer token (a rank's: its slot)."""

    route: str
    method: str
    path: str
    token: str
    rank: RankSlot | None = None


@dataclass
class Outcome:
    """Latencies and failures per route of one phase."""

    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    points: int = 0
    started: float = 0.0
    ended: float = 0.0

    def record(self, route: str, seconds: float, error: str | None, points: int = 0) -> None:
        if error is None:
            self.latencies[route].append(seconds)
            self.points += points
        else:
            self.errors[route][error] += 1
        if error != UNFINISHED:
            self.ended = max(self.ended, time.perf_counter())

    def ok(self, routes: Sequence[str] | None = None) -> int:
        return sum(len(v) for k, v in self.latencies.items() if routes is None or k in routes)

    def failed(self, routes: Sequence[str] | None = None) -> int:
        return sum(sum(v.values()) for k, v in self.errors.items() if routes is None or k in routes)


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) by nearest rank; 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, math.ceil(q * len(ordered) - 1e-9) - 1))
    return ordered[index]


def summary(values: Sequence[float]) -> dict[str, float]:
    ms = 1000.0
    return {
        "p50_ms": round(percentile(values, 0.50) * ms, 2),
        "p90_ms": round(percentile(values, 0.90) * ms, 2),
        "p99_ms": round(percentile(values, 0.99) * ms, 2),
        "max_ms": round(max(values, default=0.0) * ms, 2),
    }


class Ranks:
    """The benchmark's ranks: each reports its own steps in order, like a reporter."""

    def __init__(self, slots: Sequence[RankSlot], batch_points: int) -> None:
        self.slots = list(slots)
        self.batch_points = batch_points
        self._next_step = dict.fromkeys(range(len(slots)), 0)
        self._turn = 0

    def call(self, index: int | None = None) -> Call:
        if index is None:
            index, self._turn = self._turn, (self._turn + 1) % len(self.slots)
        slot = self.slots[index]
        return Call(INGEST, "POST", f"{API}/jobs/{slot.job_id}/metrics", slot.token, slot)

    def body(self, call: Call) -> dict[str, Any]:
        """The next batch of ``call``'s rank: ``batch_points`` points, every metric per step."""
        assert call.rank is not None
        index = self.slots.index(call.rank)
        start = self._next_step[index]
        steps = max(1, self.batch_points // len(METRICS))
        self._next_step[index] = start + steps
        at = datetime.now(UTC).isoformat()
        points = [
            {
                "rank": call.rank.rank,
                "name": name,
                "step": s,
                "value": metric_value(name, s, 100_000),
                "time": at,
            }
            for s in range(start, start + steps)
            for name in METRICS
        ][: self.batch_points]
        return {"task_id": call.rank.task_id, "points": points}


def dashboard_calls(seeded: Seeded, admin_token: str, count: int, seed: int = 7) -> list[Call]:
    """``count`` dashboard requests in the mix's shares, half by the admin, half by a party
    of the job looked at."""
    rng = random.Random(seed)
    names = [name for name, _ in DASHBOARD_MIX]
    weights = [share for _, share in DASHBOARD_MIX]
    calls = []
    for i in range(count):
        route = rng.choices(names, weights)[0]
        job = seeded.view_jobs[rng.randrange(len(seeded.view_jobs))]
        party = seeded.view_parties[job][rng.randrange(2)]
        token = admin_token if i % 2 == 0 else seeded.tokens[party]
        if route == "jobs.list":
            query = f"limit=20&offset={20 * rng.randrange(3)}"
            if rng.random() < 0.3:
                query += "&status=running"
            calls.append(Call(route, "GET", f"{API}/jobs?{query}", token))
        elif route == "jobs.get":
            calls.append(Call(route, "GET", f"{API}/jobs/{job}", token))
        elif route == "metrics.query":
            calls.append(Call(route, "GET", f"{API}/jobs/{job}/metrics?max_points=1000", token))
        else:
            calls.append(Call(route, "GET", f"{API}/jobs/{job}/events?once=true", token))
    return calls


class Traffic:
    """Sends calls over ``connections`` keep-alive connections per replica, each with its own
    client: one pooled client slows down with many connections (its pool scans every
    connection for every request), and the generator must not be what limits the rate."""

    def __init__(self, bases: Sequence[str], ranks: Ranks, *, connections: int) -> None:
        self.bases = list(bases)
        self.ranks = ranks
        self._clients: list[httpx.AsyncClient] = []
        self._tls = ssl.create_default_context()
        # kept from one phase to the next, so the measured phase finds them open
        self.pool = {base: [self.client() for _ in range(connections)] for base in self.bases}

    def client(self) -> httpx.AsyncClient:
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
        # one TLS context for all (plain HTTP needs none, but each client would load its own)
        made = httpx.AsyncClient(limits=limits, timeout=TIMEOUT_S, verify=self._tls)
        self._clients.append(made)
        return made

    async def close(self) -> None:
        for client in self._clients:
            await client.aclose()
        self._clients.clear()

    async def send(
        self, client: httpx.AsyncClient, base: str, call: Call, planned: float, outcome: Outcome
    ) -> None:
        """Send ``call`` and record its latency from ``planned`` (a perf_counter time)."""
        url = base + call.path
        headers = {"Authorization": f"Bearer {call.token}"}
        error: str | None = None
        points = 0
        try:
            if call.method == "POST":
                body = self.ranks.body(call)
                points = len(body["points"])
                content = json.dumps(body).encode()
                headers["Content-Type"] = "application/json"
                response = await client.post(url, content=content, headers=headers)
            else:  # the whole body, an event stream's too (``once=true`` ends it)
                response = await client.get(url, headers=headers)
            if response.status_code >= 400:
                error = str(response.status_code)
        except httpx.HTTPError as exc:
            error = type(exc).__name__
        except asyncio.CancelledError:
            outcome.record(call.route, 0.0, UNFINISHED)
            raise
        outcome.record(call.route, time.perf_counter() - planned, error, points)

    async def open_loop(
        self, calls: Sequence[tuple[float, Call]], drain_s: float = TIMEOUT_S
    ) -> Outcome:
        """Send each call at its offset (seconds from now) without waiting for earlier ones:
        calls go to the replicas in turn, and wait in line only when every connection to
        their replica is busy (that wait counts in their latency). Calls not answered
        ``drain_s`` after the last was due count as errors (``unfinished``)."""
        outcome = Outcome()
        lines: list[asyncio.Queue[tuple[float, Call]]] = [asyncio.Queue() for _ in self.bases]

        async def connection(
            client: httpx.AsyncClient, base: str, line: asyncio.Queue[tuple[float, Call]]
        ) -> None:
            while True:
                planned, call = await line.get()
                try:
                    await self.send(client, base, call, planned, outcome)
                finally:
                    line.task_done()

        workers = [
            asyncio.create_task(connection(client, base, line))
            for base, line in zip(self.bases, lines, strict=True)
            for client in self.pool[base]
        ]
        start = time.perf_counter() + 0.05
        outcome.started = start
        try:
            for i, (offset, call) in enumerate(calls):
                planned = start + offset
                delay = planned - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                lines[i % len(lines)].put_nowait((planned, call))
            with anyio.move_on_after(drain_s):
                for line in lines:
                    await line.join()
        finally:
            for worker in workers:
                worker.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
        for line in lines:
            while not line.empty():
                _, call = line.get_nowait()
                outcome.record(call.route, 0.0, UNFINISHED)
        return outcome

    async def closed_loop(self, duration_s: float) -> Outcome:
        """Every rank posts batch after batch for ``duration_s``; ranks take turns over the
        replicas."""
        outcome = Outcome()
        outcome.started = time.perf_counter()
        deadline = outcome.started + duration_s

        async def rank(index: int) -> None:
            client, base = self.client(), self.bases[index % len(self.bases)]
            while time.perf_counter() < deadline:
                call = self.ranks.call(index)
                await self.send(client, base, call, time.perf_counter(), outcome)

        await asyncio.gather(*(rank(i) for i in range(len(self.ranks.slots))))
        return outcome


def schedule(
    dashboard: Sequence[Call], rate: float, ranks: Ranks, ingest_rate: float, duration_s: float
) -> list[tuple[float, Call]]:
    """Dashboard calls evenly at ``rate`` per second, rank batches at ``ingest_rate``."""
    plan = [(i / rate, call) for i, call in enumerate(dashboard) if i / rate < duration_s]
    if ingest_rate > 0 and ranks.slots:
        count = int(duration_s * ingest_rate)
        plan += [((i + 0.5) / ingest_rate, ranks.call()) for i in range(count)]
    plan.sort(key=lambda item: item[0])
    return plan
