"""What crossed a testbed link, read back as TCP streams: to check that nothing is in clear.

``Testbed.capture(host)`` starts ``python -m tessera_ml.netcapture INTERFACE FILE`` in the
router's namespace: a raw packet socket on the router's end of the host's link that appends
every frame to ``FILE`` (a 4-byte length before each) until it is stopped. ``LinkCapture``
then rebuilds each TCP connection's byte stream in sequence order, so a search for planted
bytes finds them even where they were split across packets.
"""

from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

ETH_P_ALL = 0x0003
_LEN = struct.Struct("!I")


def record(interface: str, out: Path) -> None:
    """Append every frame seen on ``interface`` to ``out`` until SIGTERM."""
    stop = False

    def finish(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, finish)
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 << 20)
    sock.bind((interface, 0))
    sock.settimeout(0.2)
    ready = out.with_suffix(".ready")
    with out.open("wb") as f:
        ready.touch()
        while not stop:
            try:
                frame = sock.recv(1 << 17)
            except (TimeoutError, InterruptedError):
                continue
            except OSError:  # the link went away with its testbed
                break
            f.write(_LEN.pack(len(frame)) + frame)
    sock.close()


def frames(path: Path) -> Iterable[bytes]:
    data = path.read_bytes()
    at = 0
    while at + 4 <= len(data):
        (n,) = _LEN.unpack_from(data, at)
        at += 4
        yield data[at : at + n]
        at += n


def tcp_streams(path: Path) -> dict[tuple[str, int, str, int], bytes]:
    """Each direction of each TCP connection in the capture, as the bytes it carried."""
    segments: dict[tuple[str, int, str, int], dict[int, bytes]] = defaultdict(dict)
    for frame in frames(path):
        if len(frame) < 14 + 20 or frame[12:14] != b"\x08\x00":
            continue
        ip = frame[14:]
        if ip[9] != 6:  # not TCP
            continue
        header = (ip[0] & 0x0F) * 4
        total = struct.unpack("!H", ip[2:4])[0] or len(ip)
        tcp = ip[header:total]
        if len(tcp) < 20:
            continue
        sport, dport, seq = struct.unpack("!HHI", tcp[:8])
        payload = tcp[(tcp[12] >> 4) * 4 :]
        if payload:
            key = (socket.inet_ntoa(ip[12:16]), sport, socket.inet_ntoa(ip[16:20]), dport)
            segments[key].setdefault(seq, payload)
    streams = {}
    for key, by_seq in segments.items():
        streams[key] = _assemble(by_seq)
    return streams


def _assemble(by_seq: dict[int, bytes]) -> bytes:
    ordered = sorted(by_seq.items())
    out = bytearray()
    end = None
    for seq, payload in ordered:
        if end is not None and seq < end:
            payload = payload[end - seq :]  # a retransmission overlapping what we have
        out += payload
        end = max(end or 0, seq + len(payload))
    return bytes(out)


class LinkCapture:
    """A running capture of one testbed link; ``stop()`` ends it, then search it."""

    def __init__(self, namespace: str, interface: str, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / f"{interface}.frames"
        argv = ["ip", "netns", "exec", namespace, sys.executable, "-m", __name__]
        self._proc = subprocess.Popen([*argv, interface, str(self.path)])
        ready = self.path.with_suffix(".ready")
        deadline = time.monotonic() + 20
        while not ready.exists():
            if self._proc.poll() is not None or time.monotonic() > deadline:
                self._proc.kill()
                raise RuntimeError(f"the capture on {interface} did not start")
            time.sleep(0.02)

    def stop(self) -> None:
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            self._proc.wait(timeout=20)

    def streams(self) -> dict[tuple[str, int, str, int], bytes]:
        return tcp_streams(self.path)

    def matches(self, needles: Iterable[bytes]) -> int:
        """How many of ``needles`` appear in some TCP stream that crossed the link."""
        streams = list(self.streams().values())
        return sum(1 for needle in needles if any(needle in s for s in streams))

    def tcp_bytes(self) -> int:
        return sum(len(s) for s in self.streams().values())


if __name__ == "__main__":
    record(sys.argv[1], Path(sys.argv[2]))
    os._exit(0)
