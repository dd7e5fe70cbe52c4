"""The runner's end of the witness channel (the test processes' end: process/witness.py).

A Unix datagram socket bound in the runner's private temporary directory before the test
process starts; a thread reads every datagram into memory as it arrives. Once sent, an event is
the runner's: the test process cannot take it back, rewrite it or keep it from arriving by
how it exits. `Witness.events()` stops reading and returns what came, in order.
"""

import json
import os
import socket
import threading

_DATAGRAM = 1 << 16


class Witness:
    def __init__(self, directory: str):
        self.address = os.path.join(directory, "witness.sock")
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._socket.bind(self.address)
        self._socket.settimeout(0.1)  # the reader looks at its stop flag this often
        self._events: list[dict] = []
        self._unreadable = 0
        self._stop = threading.Event()
        self._reader = threading.Thread(target=self._read, name="witness", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = self._socket.recv(_DATAGRAM)
            except TimeoutError:
                if self._stop.is_set():
                    return  # nothing queued and no more wanted
                continue
            except OSError:
                return
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
