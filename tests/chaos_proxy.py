"""A TCP proxy that breaks the network between a DynamoDB client and its engine, on demand.

:class:`ChaosProxy` listens on 127.0.0.1 (a free port) and forwards every connection to an
upstream engine (DynamoDB Local in the chaos tests). Point a boto3 client at
:attr:`ChaosProxy.endpoint_url` and change what the network does while the client runs:

* :meth:`~ChaosProxy.pass_through` (also "heal"): forward both ways;
* :meth:`~ChaosProxy.blackhole`: a partition. Connections are accepted and held, but nothing is
  forwarded and nothing answered, in either direction; a request in flight is lost with its
  connection, as is its answer. The client sees its read timeout.
* :meth:`~ChaosProxy.drop_answers`: requests are forwarded, so writes land, but the answers are
  discarded: the client times out on a write that happened;
* :meth:`~ChaosProxy.add_latency`: each request waits that long before it is forwarded;
* :meth:`~ChaosProxy.reset_connections`: every request is answered with a TCP reset (RST),
  nothing is forwarded; :meth:`~ChaosProxy.reset_next_requests` does that for the next ``n``
  requests only, and :meth:`~ChaosProxy.reset_next_answers` forwards the next ``n`` requests
  (the write lands) and then resets the connection instead of answering.
  :meth:`~ChaosProxy.reset_open_connections` resets every open connection at once.

The proxy knows HTTP only as far as this: on each connection, bytes from the client after an
answer (or on a fresh connection) start a new request, and the first bytes from the engine
after a request start its answer. A connection that lost a request or an answer is never
forwarded again (its HTTP stream is broken); the client abandons it after its timeout, as it
would a connection through a real partition.

It runs on plain threads (one acceptor, two pumps per connection) and needs nothing but the
standard library.
"""
from __future__ import annotations

import dataclasses
import socket
import struct
import threading
import time
from typing import Dict, List, Optional

__all__ = ['ChaosProxy', 'ProxyStats']

PASS = 'pass'
BLACKHOLE = 'blackhole'
DROP_ANSWERS = 'drop-answers'
RESET = 'reset'
_MODES = (PASS, BLACKHOLE, DROP_ANSWERS, RESET)
_CHUNK = 65536


@dataclasses.dataclass
class ProxyStats:
    """What the proxy did since it started (a snapshot; see :attr:`ChaosProxy.stats`)."""

    connections: int = 0
    requests_forwarded: int = 0
    requests_swallowed: int = 0
    answers_forwarded: int = 0
    answers_dropped: int = 0
    resets: int = 0


def _reset(sock: socket.socket) -> None:
    """Close ``sock`` with a TCP RST instead of a FIN (SO_LINGER with a zero timeout).

    ``shutdown(SHUT_RD)`` first wakes a thread blocked reading the socket (it sends no FIN):
    a socket closed while another thread sits in ``recv`` is torn down, and the RST sent,
    only when that ``recv`` returns.
    """
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))
        sock.shutdown(socket.SHUT_RD)
    except OSError:
        pass
    _close(sock)


def _shut(sock: Optional[socket.socket]) -> None:
    """Close ``sock`` normally, waking any thread blocked reading it."""
    if sock is None:
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    _close(sock)


def _close(sock: Optional[socket.socket]) -> None:
    if sock is None:
        return
    try:
        sock.close()
    except OSError:
        pass


class _Connection:
    """One client connection and, once its first request is forwarded, its upstream connection."""

    def __init__(self, proxy: 'ChaosProxy', client: socket.socket, number: int) -> None:
        self.proxy = proxy
        self.client = client
        self.number = number
        self.upstream: Optional[socket.socket] = None
        self.awaiting_answer = False     # a request was forwarded and its answer has not started
        self.requests_broken = False     # a request was swallowed: never forward on this connection
        self.answers_broken = False      # an answer was dropped: never answer on this connection
        self.closed = False
        self.guard = threading.Lock()

    def start(self) -> None:
        threading.Thread(target=self._pump_requests, name=f'chaos-proxy-{self.number}-requests',
                         daemon=True).start()

    # -- client -> upstream ---------------------------------------------------------------

    def _pump_requests(self) -> None:
        try:
            while True:
                data = self.client.recv(_CHUNK)
                if not data:
                    break
                if not self._forward_request(data):
                    return
        except OSError:
            pass
        self.close()

    def _forward_request(self, data: bytes) -> bool:
        """Forward (or not) one chunk from the client; False when the connection was reset."""
        proxy = self.proxy
        with proxy._guard:
            starts_request = not self.awaiting_answer
            if self.requests_broken:
                proxy._stats.requests_swallowed += starts_request
                return True
            latency = 0.0
            if starts_request:
                if proxy._mode == RESET or proxy._reset_requests > 0:
                    if proxy._mode != RESET:
                        proxy._reset_requests -= 1
                    proxy._stats.resets += 1
                    self.reset()
                    return False
                if proxy._mode == BLACKHOLE:
                    self.requests_broken = True
                    proxy._stats.requests_swallowed += 1
                    return True
                latency = proxy._latency
                proxy._stats.requests_forwarded += 1
            self.awaiting_answer = True
        if latency > 0:
            time.sleep(latency)
        if self.upstream is None and not self._connect_upstream():
            return False
        try:
            self.upstream.sendall(data)   # type: ignore[union-attr]
        except OSError:
            self.reset()
            return False
        return True

    def _connect_upstream(self) -> bool:
        try:
            self.upstream = socket.create_connection(self.proxy.upstream, timeout=5)
            self.upstream.settimeout(None)
        except OSError:
            self.reset()
            return False
        threading.Thread(target=self._pump_answers, name=f'chaos-proxy-{self.number}-answers',
                         daemon=True).start()
        return True

    # -- upstream -> client ---------------------------------------------------------------

    def _pump_answers(self) -> None:
        upstream = self.upstream
        assert upstream is not None
        try:
            while True:
                data = upstream.recv(_CHUNK)
                if not data:
                    break
                if not self._forward_answer(data):
                    return
        except OSError:
            pass
        self.close()

    def _forward_answer(self, data: bytes) -> bool:
        proxy = self.proxy
        with proxy._guard:
            starts_answer = self.awaiting_answer
            self.awaiting_answer = False
            if self.answers_broken:
                proxy._stats.answers_dropped += starts_answer
                return True
            if starts_answer:
                if proxy._reset_answers > 0:
                    proxy._reset_answers -= 1
                    proxy._stats.resets += 1
                    self.reset()
                    return False
                if proxy._mode in (DROP_ANSWERS, BLACKHOLE, RESET):
                    self.answers_broken = True
                    proxy._stats.answers_dropped += 1
                    return True
                proxy._stats.answers_forwarded += 1
        try:
            self.client.sendall(data)
        except OSError:
            self.close()
            return False
        return True

    # -- ending ---------------------------------------------------------------------------

    def reset(self) -> None:
        """RST the client; close the upstream side."""
        with self.guard:
            if self.closed:
                return
            self.closed = True
        _reset(self.client)
        _shut(self.upstream)
        self.proxy._forget(self)

    def close(self) -> None:
        with self.guard:
            if self.closed:
                return
            self.closed = True
        _shut(self.client)
        _shut(self.upstream)
        self.proxy._forget(self)


class ChaosProxy:
    """A controllable TCP proxy from 127.0.0.1 to ``(upstream_host, upstream_port)``.

    Use it as a context manager (it starts on entry, stops on exit) or call :meth:`start` and
    :meth:`stop`. Every control method takes effect for the next request or answer, on open
    connections and new ones alike, and may be called from any thread.
    """

    def __init__(self, upstream_port: int, upstream_host: str = '127.0.0.1') -> None:
        self.upstream = (upstream_host, upstream_port)
        self._guard = threading.RLock()
        self._mode = PASS
        self._latency = 0.0
        self._reset_requests = 0
        self._reset_answers = 0
        self._stats = ProxyStats()
        self._connections: Dict[int, _Connection] = {}
        self._listener: Optional[socket.socket] = None
        self._acceptor: Optional[threading.Thread] = None
        self._stopping = threading.Event()
        self.port = 0

    # -- life cycle -----------------------------------------------------------------------

    def start(self) -> 'ChaosProxy':
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(('127.0.0.1', 0))
        listener.listen(128)
        listener.settimeout(0.05)
        self._listener = listener
        self.port = listener.getsockname()[1]
        self._acceptor = threading.Thread(target=self._accept_loop, name=f'chaos-proxy-{self.port}', daemon=True)
        self._acceptor.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._acceptor is not None:
            self._acceptor.join(5)
        _close(self._listener)
        for connection in self._open_connections():
            connection.close()

    def __enter__(self) -> 'ChaosProxy':
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def endpoint_url(self) -> str:
        return f'http://127.0.0.1:{self.port}'

    # -- controls -------------------------------------------------------------------------

    def pass_through(self) -> None:
        """Heal: forward everything, no latency, no pending resets."""
        with self._guard:
            self._mode = PASS
            self._latency = 0.0
            self._reset_requests = 0
            self._reset_answers = 0

    heal = pass_through

    def blackhole(self) -> None:
        """A partition: hold connections, forward nothing, answer nothing."""
        self._set_mode(BLACKHOLE)

    def drop_answers(self) -> None:
        """Forward requests (writes land) but discard their answers."""
        self._set_mode(DROP_ANSWERS)

    def reset_connections(self) -> None:
        """Answer every request with a TCP reset, forwarding nothing, until healed."""
        self._set_mode(RESET)

    def add_latency(self, seconds: float) -> None:
        """Delay each request by ``seconds`` before forwarding it (0 removes the delay)."""
        with self._guard:
            self._latency = float(seconds)

    def reset_next_requests(self, count: int) -> None:
        """Reset the connection of each of the next ``count`` requests, forwarding none of them."""
        with self._guard:
            self._reset_requests = count

    def reset_next_answers(self, count: int) -> None:
        """Forward each of the next ``count`` requests, then reset its connection instead of answering."""
        with self._guard:
            self._reset_answers = count

    def reset_open_connections(self) -> None:
        """RST every connection that is open now."""
        for connection in self._open_connections():
            with self._guard:
                self._stats.resets += 1
            connection.reset()

    @property
    def stats(self) -> ProxyStats:
        with self._guard:
            return dataclasses.replace(self._stats)

    @property
    def pending_resets(self) -> int:
        """Resets armed with reset_next_requests / reset_next_answers that have not happened yet."""
        with self._guard:
            return self._reset_requests + self._reset_answers

    # -- internals ------------------------------------------------------------------------

    def _set_mode(self, mode: str) -> None:
        assert mode in _MODES
        with self._guard:
            self._mode = mode

    def _accept_loop(self) -> None:
        assert self._listener is not None
        number = 0
        while not self._stopping.is_set():
            try:
                client, _ = self._listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            client.settimeout(None)
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            number += 1
            connection = _Connection(self, client, number)
            with self._guard:
                self._connections[id(connection)] = connection
                self._stats.connections += 1
            connection.start()

    def _open_connections(self) -> List[_Connection]:
        with self._guard:
            return list(self._connections.values())

    def _forget(self, connection: _Connection) -> None:
        with self._guard:
            self._connections.pop(id(connection), None)
