"""TLS for the HTTP client: OpenSSL on the connection's own socket, the event loop only
saying when the socket is ready.

``loop.create_connection(..., ssl=context)`` puts a TLS protocol between the socket and
trawl's, and both asyncio's and uvloop's keep a 256 KB read buffer in every connection:
asyncio touches all of it (about 310 KB of RSS an open connection), uvloop what it has
used (``python -m bench.connection_memory``). Here OpenSSL reads the socket itself
(``ssl.SSLSocket``, non-blocking) into its record buffer, which it frees whenever that
is empty (CPython sets SSL_MODE_RELEASE_BUFFERS on every context), and decrypts into one
buffer that the client's connections share, so an idle connection holds only OpenSSL's
state of the session (about 20 KB). What it costs is system calls: OpenSSL reads a
record in two (docs/PERFORMANCE.md).

:func:`connect` connects to a checked address and makes the handshake, verifying the
certificate against the host name as ``create_connection`` did; :class:`TlsTransport`
is the asyncio transport of the connection after it. The trust store is
:func:`tls_context`'s.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import os
import socket
import ssl
from pathlib import Path
from typing import Any, Protocol

from trawl.errors import UsageError
from trawl.fetch.proxy import Prelude

RECORD = 16 * 1024
"""The most plaintext a TLS record carries (RFC 8446, 5.1): one read's worth."""
READ_BUFFER = 64 * 1024
"""Bytes a client's TLS connections decrypt into before handing them on: one buffer for
all of them, so that a large answer reaches the parser in few pieces."""


class Receiver(Protocol):
    """The protocol a :class:`TlsTransport` hands what it reads to."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None: ...

    def data_received(self, data: bytes | memoryview) -> None:
        """``data`` is valid only during the call: the buffer is reused."""

    def connection_lost(self, exc: Exception | None) -> None: ...


class _Readiness:
    """The wait of a connection being opened for its socket to become readable (or
    writable): registered with the loop once, woken as often as the handshake needs."""

    __slots__ = ("_future",)

    def __init__(self) -> None:
        self._future: asyncio.Future[None] | None = None

    def wake(self) -> None:
        future = self._future
        if future is not None and not future.done():
            future.set_result(None)

    async def wait(self) -> None:
        self._future = asyncio.get_running_loop().create_future()
        try:
            await self._future
        finally:
            self._future = None


async def connect(
    protocol: Receiver,
    address: str,
    port: int,
    context: ssl.SSLContext,
    server_hostname: str,
    buffer: memoryview,
    prelude: Prelude | None = None,
) -> TlsTransport:
    """A TCP connection to ``address`` (an IP address, checked by the caller) with TLS
    over it, the handshake made and the certificate verified for ``server_hostname`` by
    ``context``: its transport, which reads into ``buffer`` for ``protocol``. The
    socket is closed if anything fails (or is cancelled): an :class:`ssl.SSLError` when
    TLS fails, a ConnectionResetError when the server ends the connection during the
    handshake, or the OSError of the socket. The socket is registered with the loop once
    (for reading, the transport's registration after the handshake): each registration
    costs system calls. With ``prelude`` (a proxy's CONNECT, trawl.fetch.proxy), what it
    says on the connected socket comes before TLS; its failure is raised as it is."""
    loop = asyncio.get_running_loop()
    sock: socket.socket = socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET)
    fd = sock.fileno()
    readable, writable = _Readiness(), _Readiness()
    try:
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        loop.add_reader(fd, readable.wake)
        # Not loop.sock_connect: uvloop's looks the address up in its thread pool.
        failed = sock.connect_ex((address, port))
        if failed == errno.EINPROGRESS:
            loop.add_writer(fd, writable.wake)
            try:
                await writable.wait()
            finally:
                loop.remove_writer(fd)
            failed = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if failed:
            raise OSError(failed, os.strerror(failed))  # ConnectionRefusedError and kin
        if prelude is not None:
            await prelude(sock, readable.wait)
        sock = tls = context.wrap_socket(
            sock, server_hostname=server_hostname, do_handshake_on_connect=False
        )
        while True:
            try:
                tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                await readable.wait()
            except ssl.SSLWantWriteError:
                loop.add_writer(fd, writable.wake)
                try:
                    await writable.wait()
                finally:
                    loop.remove_writer(fd)
            except (ssl.SSLEOFError, ssl.SSLZeroReturnError) as exc:
                closed = f"the connection closed in the handshake: {exc}"
                raise ConnectionResetError(closed) from exc
        return TlsTransport(tls, protocol, buffer, tls.getpeername())
    except BaseException:
        loop.remove_reader(fd)
        sock.close()
        raise


@functools.cache
def default_context() -> ssl.SSLContext:
    """The system's trust store and defaults (SSL_CERT_FILE honoured), made once."""
    return ssl.create_default_context()


def tls_context(ca_file: Path | None = None) -> ssl.SSLContext:
    """The context https answers are verified with: the system's trust store and
    defaults, and the CA certificates in the PEM file ``ca_file`` besides. A file that
    cannot be read or holds no certificate is a :class:`UsageError`."""
    if ca_file is None:
        return default_context()
    context = ssl.create_default_context()
    try:
        context.load_verify_locations(cafile=ca_file)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise UsageError(f"--ca-file {ca_file}: {reason}") from None
    return context


class TlsTransport(asyncio.Transport):
    """An asyncio transport over a non-blocking ``ssl.SSLSocket`` whose handshake is
    done: reads when the loop says the socket is readable, into ``buffer``, which the
    transports of one client (one event loop) share; writes at once, or when the socket
    can take more. Closing closes the socket at once, so its OpenSSL state is freed
    then; the protocol hears of it on the loop's next turn."""

    __slots__ = ("_buffer", "_closing", "_fd", "_loop", "_peer", "_protocol", "_reading",
                 "_tls", "_unsent")  # fmt: skip

    def __init__(
        self, tls: ssl.SSLSocket, protocol: Receiver, buffer: memoryview, peer: Any
    ) -> None:
        super().__init__()
        self._loop = asyncio.get_running_loop()
        self._tls = tls
        self._fd = tls.fileno()
        self._protocol: Receiver | None = protocol
        self._buffer = buffer
        self._peer = peer
        self._closing = False
        self._unsent = b""
        """Bytes a write could not send yet: OpenSSL wants them offered again."""
        self._reading = True  # the handshake's registration, taken over here
        protocol.connection_made(self)
        if self._reading:
            self._loop.add_reader(self._fd, self._read_ready)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "peername":
            return self._peer
        if name == "socket":
            return self._tls
        if name == "ssl_object":
            return self._tls
        if name == "peercert":
            return self._tls.getpeercert()
        return default

    # reading

    def _read_ready(self) -> None:
        """Read what OpenSSL can decrypt of what has arrived, a record at a time into the
        buffer, and hand the protocol what the buffer holds. A record shorter than the
        most a record holds probably ends what the server wrote: reading stops there,
        and the loop calls again if more is there, rather than a read finding nothing
        (a system call and an exception)."""
        tls, buffer = self._tls, self._buffer
        room = len(buffer) - RECORD
        filled = 0
        ended: Exception | bool = False
        while self._reading:
            try:
                count = tls.recv_into(buffer[filled:], RECORD)
            except ssl.SSLWantReadError:
                break
            except ssl.SSLWantWriteError:
                # A message OpenSSL must answer (a key update) waits for the socket.
                self._loop.add_writer(self._fd, self._write_ready)
                break
            except (OSError, ValueError) as exc:
                ended = exc
                break
            if count == 0:
                ended = True  # the server's close_notify, or its FIN
                break
            filled += count
            if count < RECORD:
                break
            if filled > room:
                self._deliver(filled)
                filled = 0
        if filled:
            self._deliver(filled)
        if ended is not False:
            self._lose(ended if isinstance(ended, Exception) else None)
        elif self._unsent and not self._closing:
            self._write_ready()

    def _deliver(self, filled: int) -> None:
        protocol = self._protocol
        if protocol is not None:
            protocol.data_received(self._buffer[:filled])

    def pause_reading(self) -> None:
        if self._reading:
            self._reading = False
            self._loop.remove_reader(self._fd)

    def resume_reading(self) -> None:
        if not self._reading and not self._closing:
            self._reading = True
            self._loop.add_reader(self._fd, self._read_ready)

    def is_reading(self) -> bool:
        return self._reading

    # writing

    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Send ``data``; an OSError (an SSLError among them) when the connection has
        failed, a RuntimeError when it is closing."""
        if self._closing:
            raise RuntimeError("write to a closing TLS transport")
        if self._unsent:
            self._unsent += data
            return
        try:
            self._tls.write(data)
        except (ssl.SSLWantWriteError, ssl.SSLWantReadError):
            self._unsent = bytes(data)
            self._loop.add_writer(self._fd, self._write_ready)

    def _write_ready(self) -> None:
        """Offer the unsent bytes again (or let OpenSSL send what it must)."""
        self._loop.remove_writer(self._fd)
        try:
            self._tls.write(self._unsent)
        except ssl.SSLWantWriteError:
            self._loop.add_writer(self._fd, self._write_ready)
            return
        except ssl.SSLWantReadError:
            return  # offered again after the next read
        except (OSError, ValueError) as exc:
            self._lose(exc)
            return
        self._unsent = b""

    def rest(self) -> None:
        """The connection goes idle: have OpenSSL free the record buffer it keeps after
        reading a TLS 1.3 session ticket (17 KB; a write of nothing frees it)."""
        if not self._unsent and not self._closing:
            try:
                self._tls.write(b"")
            except (OSError, ValueError):
                self.abort()

    def get_write_buffer_size(self) -> int:
        return len(self._unsent)

    # closing

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        """Close the socket at once, without a close_notify: it would cost a system call
        (and the server's own would be refused), and the client's connections went
        without one under uvloop's TLS transport too (strace: three writes a fresh
        connection, the handshake's two and the request)."""
        self.abort()

    def abort(self) -> None:
        if self._closing:
            return
        self._stop()
        self._tls.close()
        self._loop.call_soon(self._tell_lost, None)

    def _lose(self, exc: Exception | None) -> None:
        """The connection ended or failed while reading or writing."""
        if self._closing:
            return
        self._stop()
        self._tls.close()
        self._tell_lost(exc)

    def _stop(self) -> None:
        self._closing = True
        self.pause_reading()
        self._loop.remove_writer(self._fd)
        self._unsent = b""

    def _tell_lost(self, exc: Exception | None) -> None:
        protocol, self._protocol = self._protocol, None
        if protocol is not None:
            protocol.connection_lost(exc)
