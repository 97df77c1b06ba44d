"""A DNS server on loopback UDP that answers every A query, whatever the name, with fixed IPv4
addresses (other queries get no records), for tests of `dns://127.0.0.1:PORT/name:port` targets:
gRPC's resolver asks the server that the target's authority names, so a test gets one name with
several replicas behind it (127.0.0.1, 127.0.0.2, ...: all loopback on Linux) without touching
the machine's resolver. The C++ tests have the same (tests/server/fake_dns_server.h)."""

import socket
import struct
import threading

_TYPE_A = 1
_CLASS_IN = 1


class FakeDnsServer:
    def __init__(self, addresses):
        self._addresses = [socket.inet_aton(a) for a in addresses]
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._socket.bind(("127.0.0.1", 0))
        self._socket.settimeout(0.05)
        self.address = f"127.0.0.1:{self._socket.getsockname()[1]}"
        self.a_queries = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def close(self):
        self._stop.set()
        self._thread.join()
        self._socket.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _serve(self):
        while not self._stop.is_set():
            try:
                query, sender = self._socket.recvfrom(512)
            except socket.timeout:
                continue
            if len(query) < 12 or struct.unpack("!H", query[4:6])[0] != 1:
                continue
            end = 12  # the one question: labels up to the root, then type and class
            while end < len(query) and query[end] != 0:
                end += 1 + query[end]
            if end + 5 > len(query):
                continue
            qtype, qclass = struct.unpack("!HH", query[end + 1:end + 5])
            answers = self._addresses if (qtype, qclass) == (_TYPE_A, _CLASS_IN) else []
            if answers:
                self.a_queries += 1
            flags = 0x8080 | (struct.unpack("!H", query[2:4])[0] & 0x0100)
            reply = query[:2] + struct.pack("!HHHHH", flags, 1, len(answers), 0, 0)
            reply += query[12:end + 5]
            for address in answers:  # the name points at the question's; TTL 0
                reply += struct.pack("!HHHIH", 0xC00C, _TYPE_A, _CLASS_IN, 0, 4) + address
            self._socket.sendto(reply, sender)
