"""An HL7 receiver for tests/hl7_link.rs and tests/hl7_durability.rs: the Python `hl7`
package's asyncio MLLP server.

    python3 tests/hl7_peer.py PORT CONTROL_FILE OUT_FILE [PORT_FILE [CERT KEY]]

Listens on 127.0.0.1:PORT (0: any free port, written to PORT_FILE), over TLS with the PEM
certificate CERT and key KEY when they are given. Every message received is
appended to OUT_FILE as one JSON line {"msg": the message, segments joined by "\r", "answer":
how it was answered}, flushed, before it is answered. How to answer is read from CONTROL_FILE
at each message (so the test changes it while the peer runs):

    aa | ae | ar          that acknowledgement code (AE and AR with MSA-3 "refused by test")
    ca | ce | cr          that commit acknowledgement code (CE and CR likewise refused)
    ora                   AA in an ORA^R41 (the alarm report's own answer) instead of an ACK
    wrong                 AA, its MSA-2 naming another message
    late SECS             AA, after SECS seconds
    never                 no answer
    garbage               bytes outside any MLLP frame
    huge BYTES            an MLLP frame of BYTES bytes

The peer checks no coded value; the test does.
"""

import asyncio
import json
import sys

import hl7
import hl7.mllp


def main():
    port, control, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    port_file = sys.argv[4] if len(sys.argv) > 4 else None
    tls = None
    if len(sys.argv) > 6:
        import ssl

        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(sys.argv[5], sys.argv[6])

    async def answer(reader, writer):
        try:
            while not writer.is_closing():
                msg = await reader.readmessage()
                with open(control) as f:
                    mode = f.read().split()
                with open(out, "a") as f:
                    f.write(json.dumps({"msg": str(msg), "answer": " ".join(mode)}) + "\n")
                    f.flush()
                kind = mode[0]
                if kind in ("aa", "ae", "ar", "ca", "ce", "cr"):
                    ack = str(msg.create_ack(kind.upper())).rstrip("\r")
                    if kind in ("ae", "ar", "ce", "cr"):
                        ack += "|refused by test"
                    writer.writeblock(ack.encode())
                elif kind == "ora":
                    segs = str(msg.create_ack("AA")).rstrip("\r").split("\r")
                    msh = segs[0].split("|")
                    msh[8] = "ORA^R41^ORA_R41"
                    segs[0] = "|".join(msh)
                    writer.writeblock("\r".join(segs).encode())
                elif kind == "wrong":
                    ack = str(msg.create_ack("AA")).rstrip("\r").split("\r")
                    ack[-1] = "MSA|AA|999999999"
                    writer.writeblock("\r".join(ack).encode())
                elif kind == "late":
                    await asyncio.sleep(float(mode[1]))
                    writer.writemessage(msg.create_ack("AA"))
                elif kind == "never":
                    pass
                elif kind == "garbage":
                    writer.write(b"not an MLLP frame\r\n")
                elif kind == "huge":
                    writer.writeblock(b"x" * int(mode[1]))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def serve():
        server = await hl7.mllp.start_hl7_server(
            answer, "127.0.0.1", port, limit=1 << 20, ssl=tls
        )
        if port_file:
            with open(port_file + ".tmp", "w") as f:
                f.write(str(server.sockets[0].getsockname()[1]))
            import os

            os.replace(port_file + ".tmp", port_file)
        async with server:
            await server.serve_forever()

    asyncio.run(serve())


if __name__ == "__main__":
    main()
