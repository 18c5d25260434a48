"""An h2 client with prior knowledge (one connection, one request after
another, as kubectl and client-go send theirs over TLS), for
bench/instructions.sh and bench/h2c_cpu.sh. Needs the `h2` package; the
HTTP/1.1 client beside it (bench/h2c_cpu.sh's `H2C_CLIENT=http1`) does
not."""

import http.client
import socket
import sys
import time


def connect(port):
    """A connection to 127.0.0.1:`port`, waited for up to 60 s (the proxy
    may still be starting)."""
    deadline = time.time() + 60
    while True:
        try:
            return socket.create_connection(("127.0.0.1", port))
        except OSError:
            if time.time() > deadline:
                sys.exit("the proxy did not start")
            time.sleep(0.2)


class H1:
    """One keep-alive HTTP/1.1 connection to 127.0.0.1:`port`, waited for
    up to 60 s: the client of bench/instructions.sh's counts."""

    def __init__(self, port):
        connect(port).close()
        self.c = http.client.HTTPConnection("127.0.0.1", port)

    def get(self, path, headers=()):
        """GETs `path`: its status (bytes, as `H2c.get`'s) and body."""
        self.c.request("GET", path, headers=dict(headers))
        r = self.c.getresponse()
        return str(r.status).encode(), r.read()


class H2c:
    """One connection to 127.0.0.1:`port`, waited for up to 60 s."""

    def __init__(self, port):
        # Imported here: the HTTP/1.1 client runs without the package.
        import h2.config
        import h2.connection
        import h2.events

        self.events = h2.events
        self.s = connect(port)
        self.authority = f"127.0.0.1:{port}"
        self.h = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        self.h.initiate_connection()
        self.s.sendall(self.h.data_to_send())

    def get(self, path, headers=()):
        """GETs `path`: its status (bytes) and body."""
        h, s = self.h, self.s
        sid = h.get_next_available_stream_id()
        head = [(":method", "GET"), (":path", path), (":scheme", "http"),
                (":authority", self.authority)] + [(k.lower(), v) for k, v in headers]
        h.send_headers(sid, head, end_stream=True)
        s.sendall(h.data_to_send())
        status, body, done = None, b"", False
        while not done:
            data = s.recv(65536)
            if not data:
                sys.exit("the proxy closed the h2 connection")
            for ev in h.receive_data(data):
                if isinstance(ev, self.events.ResponseReceived):
                    status = dict(ev.headers)[b":status"]
                elif isinstance(ev, self.events.DataReceived):
                    body += ev.data
                    h.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                elif isinstance(ev, self.events.StreamEnded) and ev.stream_id == sid:
                    done = True
            s.sendall(h.data_to_send())
        return status, body
