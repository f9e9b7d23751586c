"""Rank 0 echoes one message over TCP; rank 1 sends it to the master and logs the answer."""

import socket
import sys
import time

rank, master, port, log = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
if rank == 0:
    with socket.create_server(("0.0.0.0", port)) as server:
        connection, _ = server.accept()
        with connection:
            connection.sendall(connection.recv(100))
else:
    for _ in range(100):
        try:
            client = socket.create_connection((master, port), timeout=1)
            break
        except OSError:
            time.sleep(0.1)
    else:
        sys.exit(f"rank 1: nothing listens at {master}:{port}")
    with client:
        client.sendall(f"hello from rank {rank}".encode())
        with open(log, "w") as out:
            out.write(client.recv(100).decode() + "\n")
