#!/usr/bin/env python3
"""Counts the engine API calls a command makes.

    engine_calls.py SOCKET_IN UPSTREAM_SOCKET LOG -- COMMAND...

Listens on SOCKET_IN, forwards every connection to UPSTREAM_SOCKET (the
engine's socket) and appends each HTTP request line the clients send
(`POST /v1.41/containers/create`) to LOG, then runs COMMAND with
DOCKER_HOST pointing at SOCKET_IN and exits with its status. The proxy adds
latency: count calls through it, time without it.
"""
import os
import re
import socket
import subprocess
import sys
import threading

REQUEST = re.compile(rb"(GET|POST|PUT|DELETE|HEAD) (/\S+) HTTP/1\.[01]\r\n")


def pump(src, dst, log=None, lock=None):
    pending = b""
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            if log is not None:
                # Request lines start a message; a line split across two
                # reads is found in the joined tail.
                pending = (pending + data)[-8192:]
                while True:
                    m = REQUEST.search(pending)
                    if not m:
                        break
                    with lock:
                        log.write(f"{m.group(1).decode()} {m.group(2).decode()}\n")
                        log.flush()
                    pending = pending[m.end():]
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def serve(listener, upstream, log, lock):
    while True:
        client, _ = listener.accept()
        engine = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        engine.connect(upstream)
        threading.Thread(target=pump, args=(client, engine, log, lock), daemon=True).start()
        threading.Thread(target=pump, args=(engine, client), daemon=True).start()


def main():
    if len(sys.argv) < 6 or sys.argv[4] != "--":
        sys.exit(__doc__)
    listen_path, upstream, log_path = sys.argv[1:4]
    command = sys.argv[5:]
    if os.path.exists(listen_path):
        os.unlink(listen_path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(listen_path)
    listener.listen(64)
    lock = threading.Lock()
    with open(log_path, "a") as log:
        threading.Thread(target=serve, args=(listener, upstream, log, lock), daemon=True).start()
        env = dict(os.environ, DOCKER_HOST=f"unix://{listen_path}")
        status = subprocess.call(command, env=env)
    os.unlink(listen_path)
    sys.exit(status)


if __name__ == "__main__":
    main()
