#!/usr/bin/env python3
"""The Python SDK runner ("py-sdk") of the conformance suite (conformance/README.md).

Client connections are driven by this SDK; raw connections by a plain socket.
Used by tests/test_conformance.py, and as a command that writes one JSON line
per scenario for the Go table (``go run ./cmd/fibril-conformance -merge py.jsonl``)::

    python tests/conformance_runner.py --url 127.0.0.1:4222 > py.jsonl
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import fibril
from fibril import _proto as proto
from fibril._common import KIND_JSON
from fibril.errors import FibrilError

RUNNER = "py-sdk"
FAST = fibril.Reconnect(initial=0.02, max_delay=0.25)
DEFAULT_DIR = Path(__file__).resolve().parent.parent.parent / "conformance"


class StepFailed(AssertionError):
    """A step did not meet its expectation."""


def load_scenarios(directory: Path) -> list[dict[str, Any]]:
    """Loads ``scenarios/*.json`` in file-name order."""
    return [json.loads(p.read_text(encoding="utf-8")) for p in sorted((directory / "scenarios").glob("*.json"))]


def load_known_failures(directory: Path) -> dict[str, str]:
    p = directory / "known_failures.json"
    if not p.exists():
        return {}
    data = json.loads(p.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return {str(k): str(v) for k, v in data.items()}


def missing_features(scenario: dict[str, Any], info: dict[str, Any], can_restart: bool) -> list[str]:
    """Returns the required features this runner or server lacks."""
    out = []
    feats = info.get("features") or []
    for f in scenario.get("requires", []):
        if f == "restart":
            ok = can_restart
        elif f == "fibril":
            ok = int(info.get("fibril") or 0) >= 1
        else:
            ok = bool(info.get(f)) or f in feats
        if not ok:
            out.append(f)
    return out


OPS = {
    "connect", "close", "restart_server", "topic_create", "topic_info", "topic_delete", "topic_list", "topic_requeue",
    "group_create", "group_info", "group_delete", "group_list", "publish", "publish_many", "poll",
    "ack", "nack", "reject", "extend", "subscribe", "receive", "receive_all", "expect_quiet",
    "unsubscribe", "raw_connect", "raw_send", "raw_expect", "raw_expect_closed",
    "kill_node", "restart_node",
}
EXPECTS = {
    "stored", "duplicate", "partition", "count", "min_count", "messages", "distinct_data", "ordered_by_key",
    "same_partition_per_key", "distinct_partitions", "min_elapsed_ms", "max_elapsed_ms", "fields",
    "names", "absent_names",
}
MESSAGE_EXPECTS = {"data", "data_size", "subject", "delivery_count", "headers", "no_headers"}


def unsupported(scenario: dict[str, Any]) -> list[str]:
    """Returns the ops and expectation fields of a scenario this runner does not
    know (a suite newer than the runner): such a scenario is not run, rather
    than passing with checks silently left out."""
    out = []
    for st in scenario["steps"]:
        if st.get("op") not in OPS:
            out.append(f"op {st.get('op')!r}")
        exp = st.get("expect") or {}
        out += [f"expect {k!r}" for k in exp if k not in EXPECTS]
        for m in exp.get("messages") or []:
            out += [f"message expect {k!r}" for k in m if k not in MESSAGE_EXPECTS]
    return out


def pattern(size: int) -> bytes:
    return bytes(ord("a") + i % 26 for i in range(size))


class Raw:
    """A raw connection: bytes from the scenario over a plain socket."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.r = reader
        self.w = writer

    async def line(self) -> str | None:
        b = await self.r.readline()
        if not b:
            return None
        return b.rstrip(b"\n").rstrip(b"\r").decode("utf-8", "surrogateescape")

    def close(self) -> None:
        self.w.transport.abort()


class Scenario:
    """Runs one scenario with this SDK."""

    def __init__(
        self,
        addr: str,
        info: dict[str, Any],
        restart: Callable[[], Awaitable[None]] | None = None,
        nodes: list[str] | None = None,
        node_op: Callable[[str, int], Awaitable[None]] | None = None,
    ) -> None:
        self.addr = addr
        self.info = info
        self.restart = restart
        # A cluster scenario's client addresses in node order (clients are
        # given all of them, so they talk to node 0 first), and the runner's
        # kill_node / restart_node.
        self.nodes = nodes or []
        self.node_op = node_op
        mp = int(info.get("max_payload") or proto.DEFAULT_MAX_PAYLOAD)
        self.vars: dict[str, str] = {"max_payload": str(mp), "max_payload_plus1": str(mp + 1)}
        self.max_payload = mp
        self.conns: dict[str, fibril.Client] = {}
        self.raws: dict[str, Raw] = {}
        self.saved: dict[str, list[fibril.Msg]] = {}
        self.subs: dict[str, fibril.Subscription] = {}

    # -- variables -----------------------------------------------------------

    def expand(self, v: Any) -> Any:
        if isinstance(v, str):
            return re.sub(r"\$\{([A-Za-z0-9_.]+)\}", lambda m: self.vars.get(m.group(1), m.group(0)), v)
        if isinstance(v, list):
            return [self.expand(x) for x in v]
        if isinstance(v, dict):
            return {k: self.expand(x) for k, x in v.items()}
        return v

    def size(self, spec: Any) -> int:
        if isinstance(spec, int):
            return spec
        s = str(spec).replace(" ", "")
        m = re.fullmatch(r"max_payload(([+-])(\d+))?", s)
        if m is None:
            raise StepFailed(f"bad data_size {spec!r}")
        n = self.max_payload
        if m.group(1):
            n = n + int(m.group(3)) if m.group(2) == "+" else n - int(m.group(3))
        return n

    # -- running -------------------------------------------------------------

    async def run(self, scenario: dict[str, Any]) -> None:
        self.vars["T"] = f"cf.{RUNNER}.{scenario['name']}.{uuid.uuid4().hex[:8]}"
        try:
            for i, raw_step in enumerate(scenario["steps"], 1):
                step = self.expand(raw_step)
                op = step["op"]
                limit = step.get("timeout_ms", 10000) / 1000 + step.get("wait_ms", 0) / 1000
                if op == "restart_server":
                    limit = 60
                try:
                    await asyncio.wait_for(self.step(step), limit)
                except StepFailed as e:
                    raise StepFailed(f"step {i} ({op}): {e}") from None
                except asyncio.TimeoutError:
                    raise StepFailed(f"step {i} ({op}): timed out after {limit:g} s") from None
        finally:
            for r in self.raws.values():
                r.close()
            for c in self.conns.values():
                await c.close()

    async def step(self, s: dict[str, Any]) -> None:
        want_err = s.get("error")
        try:
            result = await self.do(s)
        except (FibrilError, ValueError) as e:
            code = e.code if isinstance(e, FibrilError) else str(e).split(":", 1)[0]
            if want_err is None:
                raise StepFailed(f"unexpected error {code}: {e}") from None
            if code != want_err:
                raise StepFailed(f"error {code} ({e}), want {want_err}") from None
            return
        if want_err is not None:
            raise StepFailed(f"succeeded, want error {want_err}")
        if s.get("expect") is not None and result is not None:
            check = result
            check(s["expect"])

    def client(self, s: dict[str, Any]) -> fibril.Client:
        name = s.get("conn", "a")
        c = self.conns.get(name)
        if c is None:
            raise StepFailed(f"no client connection {name!r}")
        return c

    async def do(self, s: dict[str, Any]) -> Callable[[dict[str, Any]], None] | None:
        op = s["op"]
        name = s.get("conn", "a")
        if op == "connect":
            self.conns[name] = await fibril.connect(
                servers=[f"nats://{a}" for a in (self.nodes or [self.addr])],
                crc=s.get("crc", True),
                reconnect=FAST,
            )
            return None
        if op in ("kill_node", "restart_node"):
            if self.node_op is None:
                raise StepFailed(f"{op}: this runner's server is no cluster")
            await self.node_op(op, int(s.get("node", 0)))
            return None
        if op == "close":
            if name in self.raws:
                self.raws.pop(name).close()
            elif name in self.conns:
                await self.conns.pop(name).close()
            return None
        if op == "restart_server":
            if self.restart is None:
                raise StepFailed("this runner cannot restart the server")
            for r in self.raws.values():
                r.close()
            self.raws.clear()
            await self.restart()
            return None
        if op.startswith("raw_"):
            await self.raw(s)
            return None
        if op in ("topic_create", "topic_info", "topic_delete", "topic_list", "topic_requeue",
                  "group_create", "group_info", "group_delete", "group_list"):
            return await self.manage(s)
        if op == "publish":
            return await self.publish(s)
        if op == "publish_many":
            return await self.publish_many(s)
        if op == "poll":
            return await self.poll(s)
        if op in ("ack", "nack", "reject", "extend"):
            await self.settle(s)
            return None
        if op == "subscribe":
            c = self.client(s)
            sub = c.consume(s["topic"], s["group"], max_in_flight=s.get("max_inflight"))
            await sub.start()
            self.subs[s["sub"]] = sub
            return None
        if op in ("receive", "receive_all"):
            return await self.receive(s)
        if op == "expect_quiet":
            await self.quiet(s)
            return None
        if op == "unsubscribe":
            await self.subs[s["sub"]].close()
            return None
        raise StepFailed(f"unknown op {op!r}")

    # -- management ----------------------------------------------------------

    async def manage(self, s: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
        c = self.client(s)
        noun, verb = s["op"].upper().split("_")
        args = [s["topic"]] if "topic" in s else []
        if noun == "GROUP" and "group" in s:
            args.append(s["group"])
        if verb == "CREATE":
            if noun == "TOPIC":
                proto.validate_subject(args[0])
            else:
                proto.validate_group(args[1])
        frame = proto.encode_manage(noun, verb, *args, config=s.get("config") or None)
        answer = await c._call(frame, KIND_JSON)

        def check(e: dict[str, Any]) -> None:
            for path, want in (e.get("fields") or {}).items():
                v: Any = answer
                for part in path.split("."):
                    if not isinstance(v, dict) or part not in v:
                        raise StepFailed(f"answer has no {path}: {answer}")
                    v = v[part]
                if v != want and not (isinstance(v, (int, float)) and isinstance(want, (int, float)) and v == want):
                    raise StepFailed(f"{path} = {v!r}, want {want!r}")
            listed = set()
            for key in ("topics", "groups"):
                if isinstance(answer, dict) and isinstance(answer.get(key), list):
                    listed |= set(answer[key])
            for n in e.get("names") or []:
                if n not in listed:
                    raise StepFailed(f"{n!r} not listed in {sorted(listed)}")
            for n in e.get("absent_names") or []:
                if n in listed:
                    raise StepFailed(f"{n!r} listed")

        return check

    # -- publish -------------------------------------------------------------

    def body(self, s: dict[str, Any]) -> bytes:
        if "data_size" in s:
            return pattern(self.size(s["data_size"]))
        return str(s.get("data", "")).encode()

    @staticmethod
    def check_confirms(positions: list[fibril.Position | None]) -> Callable[[dict[str, Any]], None]:
        def check(e: dict[str, Any]) -> None:
            for p in positions:
                if "stored" in e and (p is not None) != e["stored"]:
                    raise StepFailed(f"confirm {p}, want stored={e['stored']}")
                if "partition" in e and (p is None or p.partition != e["partition"]):
                    raise StepFailed(f"confirm {p}, want partition {e['partition']}")
                if "duplicate" in e and (p is None or p.duplicate != e["duplicate"]):
                    raise StepFailed(f"confirm {p}, want duplicate={e['duplicate']}")

        return check

    async def publish(self, s: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
        c = self.client(s)
        pos = await c.publish(s["subject"], self.body(s), key=s.get("key"), headers=s.get("headers"),
                              msg_id=s.get("msg_id"))
        if s.get("save") and pos is not None:
            self.vars[f"{s['save']}.partition"] = str(pos.partition)
            self.vars[f"{s['save']}.seq"] = str(pos.seq)
        return self.check_confirms([pos])

    async def publish_many(self, s: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
        c = self.client(s)
        keys = s.get("keys") or []
        prefix = s.get("data", "m")
        futs = []
        for i in range(int(s["count"])):
            key = keys[i % len(keys)] if keys else None
            futs.append(await c.publish_async(s["subject"], f"{key or prefix}:{i}".encode(), key=key,
                                              headers=s.get("headers")))
        return self.check_confirms(list(await asyncio.gather(*futs)))

    # -- consume -------------------------------------------------------------

    async def poll(self, s: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
        c = self.client(s)
        mx = int(s.get("max", 1))
        wait = s.get("wait_ms", 0) / 1000
        t0 = time.monotonic()
        got = await c.fetch(s["topic"], s["group"], mx, wait)
        elapsed = (time.monotonic() - t0) * 1000
        total = s.get("total")
        while total is not None and len(got) < total:
            more = await c.fetch(s["topic"], s["group"], mx, wait)
            if not more:
                break
            got += more
        if s.get("save"):
            self.saved[s["save"]] = got
        return lambda e: self.check_msgs(got, e, elapsed)

    async def receive(self, s: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
        names = s.get("subs") or [s["sub"]]
        subs = [self.subs[n] for n in names]
        count = int(s["count"])
        got: list[fibril.Msg] = []
        pending = {asyncio.ensure_future(sub.next()): sub for sub in subs}
        try:
            while len(got) < count:
                done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for f in done:
                    sub = pending.pop(f)
                    m = f.result()
                    got.append(m)
                    if s.get("ack"):
                        await m.ack()
                    if len(got) < count:
                        pending[asyncio.ensure_future(sub.next())] = sub
        finally:
            for f in pending:
                f.cancel()
        if s.get("save"):
            self.saved[s["save"]] = got
        return lambda e: self.check_msgs(got, e, None)

    async def quiet(self, s: dict[str, Any]) -> None:
        names = s.get("subs") or [s["sub"]]
        futs = [asyncio.ensure_future(self.subs[n].next()) for n in names]
        done, not_done = await asyncio.wait(futs, timeout=s.get("ms", 200) / 1000)
        for f in not_done:
            f.cancel()
        if done:
            msgs = [f.result().data for f in done if not f.exception()]
            raise StepFailed(f"deliveries arrived: {msgs}")

    def refs(self, ref: str) -> list[fibril.Msg]:
        m = re.fullmatch(r"([A-Za-z0-9_]+)(?:\[(\*|-?\d+)\])?", ref)
        if m is None or m.group(1) not in self.saved:
            raise StepFailed(f"no saved messages {ref!r}")
        msgs = self.saved[m.group(1)]
        idx = m.group(2)
        if idx is None or idx == "*":
            return msgs
        try:
            return [msgs[int(idx)]]
        except IndexError:
            raise StepFailed(f"{ref!r}: only {len(msgs)} saved") from None

    async def settle(self, s: dict[str, Any]) -> None:
        c = self.client(s)
        op = s["op"]
        if "handle" in s:
            h = str(s["handle"])
            if proto.parse_handle(h) is None:
                raise fibril.errors.InvalidHandleError(f"malformed handle {h!r}")
            handles = [h]
        else:
            handles = [str(m.handle) for m in self.refs(s["msg"]) if m.handle is not None]
        for h in handles:
            if op == "ack":
                frame = proto.encode_ack([h])
            elif op == "nack":
                frame = proto.encode_nack(h, s.get("delay_ms"))
            elif op == "reject":
                frame = proto.encode_reject(h)
            else:
                frame = proto.encode_extend(h, s.get("ms"))
            await c._settle(frame)

    # -- checks --------------------------------------------------------------

    def check_msgs(self, msgs: list[fibril.Msg], e: dict[str, Any], elapsed: float | None) -> None:
        n = len(msgs)
        if "count" in e and n != e["count"]:
            raise StepFailed(f"{n} deliveries, want {e['count']}: {[m.data[:40] for m in msgs]}")
        if "min_count" in e and n < e["min_count"]:
            raise StepFailed(f"{n} deliveries, want at least {e['min_count']}")
        for i, want in enumerate(e.get("messages") or []):
            if i >= n:
                raise StepFailed(f"no delivery {i}")
            self.check_msg(i, msgs[i], want)
        if "distinct_data" in e:
            datas = [m.data for m in msgs]
            if len(set(datas)) != len(datas) or len(datas) != e["distinct_data"]:
                raise StepFailed(f"{len(set(datas))} distinct of {len(datas)}, want {e['distinct_data']} once each")
        if e.get("ordered_by_key"):
            last: dict[str, int] = {}
            for m in msgs:
                k, _, num = m.data.decode().rpartition(":")
                if k in last and int(num) <= last[k]:
                    raise StepFailed(f"key {k!r}: {num} after {last[k]}")
                last[k] = int(num)
        if e.get("same_partition_per_key"):
            parts: dict[str, set[int]] = {}
            for m in msgs:
                if m.handle is not None:
                    parts.setdefault(m.data.decode().rpartition(":")[0], set()).add(m.handle.partition)
            bad = {k: v for k, v in parts.items() if len(v) > 1}
            if bad:
                raise StepFailed(f"keys in several partitions: {bad}")
        if "distinct_partitions" in e:
            ps = {m.handle.partition for m in msgs if m.handle is not None}
            if len(ps) != e["distinct_partitions"]:
                raise StepFailed(f"partitions {sorted(ps)}, want {e['distinct_partitions']}")
        if elapsed is not None:
            if "min_elapsed_ms" in e and elapsed < e["min_elapsed_ms"]:
                raise StepFailed(f"answered after {elapsed:.0f} ms, want >= {e['min_elapsed_ms']}")
            if "max_elapsed_ms" in e and elapsed > e["max_elapsed_ms"]:
                raise StepFailed(f"answered after {elapsed:.0f} ms, want <= {e['max_elapsed_ms']}")

    def check_msg(self, i: int, m: fibril.Msg, want: dict[str, Any]) -> None:
        if "data" in want and m.data != str(want["data"]).encode():
            raise StepFailed(f"delivery {i}: data {m.data[:60]!r}, want {want['data']!r}")
        if "data_size" in want and m.data != pattern(self.size(want["data_size"])):
            raise StepFailed(f"delivery {i}: {len(m.data)} bytes, want the {want['data_size']} pattern")
        if "subject" in want and m.subject != want["subject"]:
            raise StepFailed(f"delivery {i}: subject {m.subject!r}, want {want['subject']!r}")
        if "delivery_count" in want and m.delivery_count != want["delivery_count"]:
            raise StepFailed(f"delivery {i}: delivery count {m.delivery_count}, want {want['delivery_count']}")
        for k, v in (want.get("headers") or {}).items():
            first = next((hv for hk, hv in m.header_pairs if hk.lower() == k.lower()), None)
            if first != v:
                raise StepFailed(f"delivery {i}: header {k} = {first!r}, want {v!r}")
        for k in want.get("no_headers") or []:
            if any(hk.lower() == k.lower() for hk, _ in m.header_pairs):
                raise StepFailed(f"delivery {i}: header {k} present")

    # -- raw connections -----------------------------------------------------

    async def raw(self, s: dict[str, Any]) -> None:
        op = s["op"]
        name = s.get("conn", "a")
        if op == "raw_connect":
            host, port = self.addr.rsplit(":", 1)
            r, w = await asyncio.open_connection(host, int(port))
            conn = Raw(r, w)
            self.raws[name] = conn
            first = await conn.line()
            if first is None or not first.upper().startswith("INFO"):
                raise StepFailed(f"first line {first!r}, want INFO")
            if "connect" in s:
                w.write(b"CONNECT " + json.dumps(s["connect"]).encode() + b"\r\n")
            elif s.get("fibril", True):
                crc = "true" if s.get("crc", True) else "false"
                w.write(b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"fibril":1,"confirm":true,"crc":'
                        + crc.encode() + b"}\r\n")
                line = await self.raw_line(conn)
                if line != "+OK":
                    raise StepFailed(f"CONNECT answered {line!r}")
            else:
                w.write(b'CONNECT {"verbose":false,"pedantic":false,"headers":true}\r\n')
            return
        raw = self.raws.get(name)
        if raw is None:
            raise StepFailed(f"no raw connection {name!r}")
        if op == "raw_send":
            raw.w.write(str(s["text"]).encode("utf-8", "surrogateescape"))
            await raw.w.drain()
        elif op == "raw_expect":
            captured: list[str] = []
            for rx in s["lines"]:
                line = await self.raw_line(raw)
                if line is None:
                    raise StepFailed(f"connection closed, want {rx!r}")
                m = re.fullmatch(f"(?:{rx})", line)
                if m is None:
                    raise StepFailed(f"line {line!r} does not match {rx!r}")
                captured += [g for g in m.groups()]
            for var, val in zip(s.get("vars") or [], captured):
                self.vars[var] = val
        elif op == "raw_expect_closed":
            while await raw.line() is not None:
                pass
        else:
            raise StepFailed(f"unknown op {op!r}")

    @staticmethod
    async def raw_line(raw: Raw) -> str | None:
        while True:
            line = await raw.line()
            if line == "PING":
                raw.w.write(b"PONG\r\n")
                continue
            return line


async def server_info(addr: str) -> dict[str, Any]:
    """Reads INFO once from the server."""
    host, port = addr.rsplit(":", 1)
    r, w = await asyncio.open_connection(host, int(port))
    try:
        line = await r.readline()
    finally:
        w.close()
    info = json.loads(line.split(b" ", 1)[1])
    assert isinstance(info, dict)
    return info


async def run_all(addr: str, directory: Path, pattern_re: str) -> list[dict[str, str]]:
    info = await server_info(addr)
    out = []
    for sc in load_scenarios(directory):
        if not re.search(pattern_re, sc["name"]):
            continue
        missing = missing_features(sc, info, can_restart=False)
        if sc.get("cluster"):
            missing.append(f"a cluster of {sc['cluster']} (this command runs against one server)")
        gaps = unsupported(sc)
        if gaps:
            out.append({"scenario": sc["name"], "runner": RUNNER, "status": "FAIL",
                        "detail": "runner does not support " + ", ".join(gaps)})
            continue
        if missing:
            # The table shows what cannot be run as a failure with the reason
            # (conformance/README.md, "Features"); pytest skips instead.
            out.append({"scenario": sc["name"], "runner": RUNNER, "status": "FAIL",
                        "detail": "missing " + ", ".join(missing)})
            continue
        try:
            await Scenario(addr, info).run(sc)
            out.append({"scenario": sc["name"], "runner": RUNNER, "status": "pass", "detail": ""})
        except Exception as e:  # noqa: BLE001 - every failure is a row of the table
            out.append({"scenario": sc["name"], "runner": RUNNER, "status": "FAIL", "detail": str(e)})
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", required=True, help="host:port of a running fibril serve")
    p.add_argument("--dir", default=str(DEFAULT_DIR), help="conformance directory")
    p.add_argument("--run", default="", help="regular expression selecting scenarios")
    args = p.parse_args()
    addr = args.url.split("://", 1)[-1]
    rows = asyncio.run(run_all(addr, Path(args.dir), args.run))
    for row in rows:
        print(json.dumps(row))
    return 1 if any(r["status"] == "FAIL" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
