"""The runner's ends of the test processes' channels (the test processes' end: process/witness.py).

`Witness`: a Unix datagram socket bound in the runner's private temporary directory before the
test process starts, for the witness's events of every process of the test (ranks connect to
its address). `Stream`: one end of a socket pair whose other end one process inherits (the
ledger of the test process, the inventory's record): no path names it, so no other process can
open it. A thread reads each into memory as data arrives. Once sent, an event or a line is the
runner's: the test process cannot take it back, rewrite it or keep it from arriving by how it
exits. `events()` and `text()` stop reading and return what came, in order.
"""

import json
import os
import socket
import threading

_DATAGRAM = 1 << 16


def _read(sock: socket.socket, keep, stop: threading.Event, stream: bool) -> threading.Thread:
    """A thread handing what `sock` receives to `keep` until `stop` is set and nothing is
    queued (or every writer of a stream closed it)."""
    sock.settimeout(0.1)  # the reader looks at its stop flag this often

    def read() -> None:
        while True:
            try:
                data = sock.recv(_DATAGRAM)
            except TimeoutError:
                if stop.is_set():
                    return  # nothing queued and no more wanted
                continue
            except OSError:
                return
            if stream and not data:
                return
            keep(data)

    reader = threading.Thread(target=read, name="witness", daemon=True)
    reader.start()
    return reader


class Witness:
    def __init__(self, directory: str):
        self.address = os.path.join(directory, "witness.sock")
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._socket.bind(self.address)
        self._events: list[dict] = []
        self._unreadable = 0
        self._stop = threading.Event()
        self._reader = _read(self._socket, self._keep, self._stop, stream=False)

    def _keep(self, data: bytes) -> None:
        try:
            self._events.append(json.loads(data))
        except ValueError:
            self._unreadable += 1

    def events(self) -> list[dict]:
        """Every event received; call once the test's processes have ended. What they sent is
        queued on the socket and read first; then the socket closes, so a process that
        outlived the test cannot add to a verdict already made."""
        self._stop.set()
        self._reader.join()
        self._socket.close()
        return list(self._events)

    @property
    def unreadable(self) -> int:
        return self._unreadable


class Stream:
    """What one process writes to the descriptor `fd` it inherits (pass_fds), as it arrives."""

    def __init__(self):
        ours, theirs = socket.socketpair()
        self.fd = theirs.detach()
        self._socket, self._chunks = ours, []
        self._stop = threading.Event()
        self._reader = _read(ours, self._chunks.append, self._stop, stream=True)

    def given(self) -> None:
        """The process has its end (started): the runner's copy of it closes."""
        os.close(self.fd)

    def text(self) -> str:
        """Everything written; call once the writer has ended (a process it forked that keeps
        the descriptor cannot hold the runner up, nor add to it afterwards)."""
        if not self._stop.is_set():
            self._stop.set()
            self._reader.join()
            self._socket.close()
        return b"".join(self._chunks).decode(errors="replace")
