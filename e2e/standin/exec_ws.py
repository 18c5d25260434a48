"""`kubectl exec` over WebSocket, as kube-apiserver 1.30+ answers it
(KEP-4006): the `v5.channel.k8s.io` subprotocol, binary messages whose first
byte is the stream (0 stdin, 1 stdout, 2 stderr, 3 error: the final Status,
255: a stream closed, its id in the next byte), and a close frame at the end.

The "container" runs three commands: `echo ARGS...` (stdout), `cat` (stdin
echoed to stdout until kubectl closes stdin) and `false` (exit code 1, as a
NonZeroExitCode Status on the error stream). Anything else exits 127.
Standard library only; frames per RFC 6455 (client frames are masked)."""
import base64
import hashlib
import json
import struct

PROTOCOL = "v5.channel.k8s.io"
GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
STDIN, STDOUT, STDERR, ERROR, CLOSE = 0, 1, 2, 3, 255


def is_websocket(headers):
    return (headers.get("Upgrade") or "").lower() == "websocket"


def handshake(handler):
    """101 with the accept key and the chosen subprotocol, or False (then the
    caller answers 400, and kubectl falls back to SPDY)."""
    offered = [p.strip() for p in (handler.headers.get("Sec-WebSocket-Protocol") or "").split(",")]
    key = handler.headers.get("Sec-WebSocket-Key")
    if PROTOCOL not in offered or not key:
        return False
    accept = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
    handler.send_response(101, "Switching Protocols")
    handler.send_header("Upgrade", "websocket")
    handler.send_header("Connection", "Upgrade")
    handler.send_header("Sec-WebSocket-Accept", accept)
    handler.send_header("Sec-WebSocket-Protocol", PROTOCOL)
    handler.end_headers()
    handler.wfile.flush()
    return True


def send(wfile, opcode, payload):
    n = len(payload)
    head = bytes([0x80 | opcode])
    if n < 126:
        head += bytes([n])
    elif n < 1 << 16:
        head += bytes([126]) + struct.pack(">H", n)
    else:
        head += bytes([127]) + struct.pack(">Q", n)
    wfile.write(head + payload)
    wfile.flush()


def receive(rfile):
    """(opcode, payload) of the next frame, or (None, b"") at EOF."""
    head = rfile.read(2)
    if len(head) < 2:
        return None, b""
    opcode, masked, n = head[0] & 0x0F, head[1] & 0x80, head[1] & 0x7F
    if n == 126:
        n = struct.unpack(">H", rfile.read(2))[0]
    elif n == 127:
        n = struct.unpack(">Q", rfile.read(8))[0]
    mask = rfile.read(4) if masked else b"\0\0\0\0"
    data = rfile.read(n)
    return opcode, bytes(b ^ mask[i % 4] for i, b in enumerate(data))


def run(argv, stdin_frames):
    """(exit code, stdout bytes) of the stand-in container's command."""
    if argv[:1] == ["echo"]:
        return 0, (" ".join(argv[1:]) + "\n").encode()
    if argv == ["cat"]:
        return 0, b"".join(stdin_frames())
    if argv == ["false"]:
        return 1, b""
    return 127, b""


def serve_exec(handler, argv, stdin):
    """Runs one exec session on an upgraded connection."""
    if not handshake(handler):
        return False

    def stdin_frames():  # stdin messages until kubectl closes the stream (or the connection)
        while stdin:
            opcode, data = receive(handler.rfile)
            if opcode is None or opcode == 0x8:
                return
            if opcode == 0x2 and data[:1] == bytes([STDIN]):
                yield data[1:]
            elif opcode == 0x2 and data[:2] == bytes([CLOSE, STDIN]):
                return

    code, out = run(argv, stdin_frames)
    if out:
        send(handler.wfile, 0x2, bytes([STDOUT]) + out)
    status = {"metadata": {}, "status": "Success"}
    if code:
        status = {"metadata": {}, "status": "Failure",
                  "message": f"command terminated with non-zero exit code: error executing command {argv}, "
                             f"exit code {code}",
                  "reason": "NonZeroExitCode",
                  "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]}}
    send(handler.wfile, 0x2, bytes([ERROR]) + json.dumps(status).encode())
    send(handler.wfile, 0x8, struct.pack(">H", 1000))
    handler.close_connection = True
    return True
