"""A ward's alarm gateway for tests/pcd04_in.rs: sends IHE PCD-04 ORU^R40 reports to Holmes's
MLLP listener with the Python `hl7` package's asyncio MLLP client, as a gateway does.

    python3 tests/pcd04_gateway.py PORT MESSAGES_FILE OUT_FILE [DEADLINE_SECS]

MESSAGES_FILE holds a JSON list of messages (segments joined by "\\r"). Each is sent on one
connection to 127.0.0.1:PORT and its answer awaited (5 s at most); where the connection fails,
closes or stays silent, the gateway reconnects (every 0.2 s) and sends the same message again:
what was not acknowledged is resent. Every answer is appended to OUT_FILE as one JSON line
{"i": the message's index, "ack": the answer, segments joined by "\\r"}, flushed; then the
next message is sent. Gives up after DEADLINE_SECS (120 by default), exiting 1.
"""

import asyncio
import json
import sys
import time

import hl7.mllp


async def main():
    port, messages, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    deadline = time.monotonic() + (float(sys.argv[4]) if len(sys.argv) > 4 else 120.0)
    with open(messages) as f:
        msgs = json.load(f)
    conn = None
    i = 0
    while i < len(msgs):
        if time.monotonic() > deadline:
            sys.exit(1)
        try:
            if conn is None:
                conn = await asyncio.wait_for(
                    hl7.mllp.open_hl7_connection("127.0.0.1", port), 2.0
                )
            reader, writer = conn
            writer.writeblock(msgs[i].encode())
            await writer.drain()
            ack = await asyncio.wait_for(reader.readmessage(), 5.0)
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, EOFError):
            if conn is not None:
                conn[1].close()
            conn = None
            await asyncio.sleep(0.2)
            continue
        with open(out, "a") as f:
            f.write(json.dumps({"i": i, "ack": str(ack)}) + "\n")
            f.flush()
        i += 1
    if conn is not None:
        conn[1].close()


if __name__ == "__main__":
    asyncio.run(main())
